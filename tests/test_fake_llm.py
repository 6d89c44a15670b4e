"""Tests for the fake OpenAI-compatible server, driven by the real ``openai.AsyncOpenAI`` client."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from tests.fakes.fake_llm import Failure, FakeLLM, Reply, ToolCallSpec

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are Mira."},
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "user", "content": "how are you?"},
]

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture
async def fake() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as llm:
        yield llm


def make_client(fake: FakeLLM, *, max_retries: int = 0, timeout: float = 5.0) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=fake.base_url, api_key="x", max_retries=max_retries, timeout=timeout
    )


async def test_base_url_is_local_with_random_port(fake: FakeLLM) -> None:
    assert fake.base_url.startswith("http://127.0.0.1:")
    assert fake.base_url.endswith("/v1")
    port = int(fake.base_url.removeprefix("http://127.0.0.1:").removesuffix("/v1"))
    assert port > 0


async def test_base_url_before_start_raises() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = FakeLLM().base_url


async def test_plain_reply_with_usage(fake: FakeLLM) -> None:
    fake.script(Reply(text="I am fine, thanks!", prompt_tokens=42, completion_tokens=7))
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(
            model="some-model", messages=MESSAGES, temperature=0.3
        )

    assert completion.object == "chat.completion"
    assert completion.model == "some-model"
    assert completion.id
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "I am fine, thanks!"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == 42
    assert completion.usage.completion_tokens == 7
    assert completion.usage.total_tokens == 49

    assert len(fake.requests) == 1
    recorded = fake.requests[0]
    assert recorded["model"] == "some-model"
    assert recorded["messages"] == MESSAGES
    assert recorded["temperature"] == 0.3
    assert fake.last_user_text() == "how are you?"
    assert fake.request_headers[0]["Authorization"] == "Bearer x"


async def test_default_usage_is_estimated(fake: FakeLLM) -> None:
    fake.script(Reply(text="abcdefghi"))
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    usage = completion.usage
    assert usage is not None
    assert usage.completion_tokens == 3  # ceil(9 / 4)
    assert usage.prompt_tokens == len(json.dumps(fake.requests[0])) // 4
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


async def test_default_responder_answers_ok_and_script_goes_first(fake: FakeLLM) -> None:
    fake.script(Reply(text="scripted"))
    async with make_client(fake) as client:
        first = await client.chat.completions.create(model="m", messages=MESSAGES)
        second = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert first.choices[0].message.content == "scripted"
    assert second.choices[0].message.content == "ok"
    assert fake.queued == 0


async def test_sync_and_async_responders_see_the_request() -> None:
    seen: list[str] = []

    def echo(request: dict[str, Any]) -> Reply:
        seen.append(request["model"])
        return Reply(text="echo: " + request["messages"][-1]["content"])

    async def echo_async(request: dict[str, Any]) -> Reply | Failure:
        await asyncio.sleep(0)
        return Reply(text="async: " + request["messages"][-1]["content"])

    async with FakeLLM(responder=echo) as llm, make_client(llm) as client:
        completion = await client.chat.completions.create(model="m1", messages=MESSAGES)
        assert completion.choices[0].message.content == "echo: how are you?"
        assert seen == ["m1"]

        llm.responder = echo_async
        completion = await client.chat.completions.create(model="m2", messages=MESSAGES)
        assert completion.choices[0].message.content == "async: how are you?"


async def test_responder_exception_becomes_500_and_is_recorded() -> None:
    def broken(request: dict[str, Any]) -> Reply:
        raise ValueError(f"cannot answer {request['model']}")

    async with FakeLLM(responder=broken) as llm, make_client(llm) as client:
        with pytest.raises(openai.InternalServerError) as excinfo:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        assert excinfo.value.status_code == 500
        assert len(llm.errors) == 1
        assert isinstance(llm.errors[0], ValueError)


async def test_tool_calls_with_dict_arguments(fake: FakeLLM) -> None:
    fake.script(Reply(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})]))
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(
            model="m", messages=MESSAGES, tools=[WEATHER_TOOL]
        )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    tool_calls = choice.message.tool_calls
    assert tool_calls is not None and len(tool_calls) == 1
    call = tool_calls[0]
    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert fake.requests[0]["tools"] == [WEATHER_TOOL]


async def test_tool_calls_with_invalid_json_string_arguments(fake: FakeLLM) -> None:
    broken = '{"city": "Par'
    fake.script(
        Reply(
            text="let me check",
            tool_calls=[
                ToolCallSpec("get_weather", broken, id="call_fixed"),
                ToolCallSpec("get_weather", '{"city": "Oslo"}'),
            ],
        )
    )
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(
            model="m", messages=MESSAGES, tools=[WEATHER_TOOL]
        )

    message = completion.choices[0].message
    assert message.content == "let me check"
    assert message.tool_calls is not None
    first, second = message.tool_calls
    assert isinstance(first, ChatCompletionMessageFunctionToolCall)
    assert isinstance(second, ChatCompletionMessageFunctionToolCall)
    assert first.id == "call_fixed"
    assert first.function.arguments == broken
    with pytest.raises(json.JSONDecodeError):
        json.loads(first.function.arguments)
    assert second.id != first.id
    assert json.loads(second.function.arguments) == {"city": "Oslo"}


async def test_reasoning_content_in_raw_message(fake: FakeLLM) -> None:
    fake.script(Reply(text="42", reasoning_content="Let me think step by step."))
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(model="deepseek-reasoner", messages=[])

    message = completion.choices[0].message
    assert message.content == "42"
    assert message.model_extra is not None
    assert message.model_extra["reasoning_content"] == "Let me think step by step."


async def test_reasoning_content_absent_by_default(fake: FakeLLM) -> None:
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert "reasoning_content" not in (completion.choices[0].message.model_extra or {})


async def test_streaming_text_and_usage_chunk(fake: FakeLLM) -> None:
    text = "Streaming works, piece by piece."
    fake.script(Reply(text=text, prompt_tokens=11, completion_tokens=5))
    async with make_client(fake) as client:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]

    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert all(chunk.model == "m" for chunk in chunks)
    with_choices = [chunk for chunk in chunks if chunk.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in with_choices if c.choices[0].delta.content]
    assert len(pieces) > 1
    assert "".join(pieces) == text
    assert with_choices[-1].choices[0].finish_reason == "stop"

    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (11, 5)
    assert last.usage.total_tokens == 16
    assert all(chunk.usage is None for chunk in chunks[:-1])
    assert fake.requests[0]["stream"] is True


async def test_streaming_without_include_usage_has_no_usage_chunk(fake: FakeLLM) -> None:
    fake.script(Reply(text="no usage here"))
    async with make_client(fake) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        chunks = [chunk async for chunk in stream]

    assert chunks
    assert all(chunk.choices for chunk in chunks)
    assert all(chunk.usage is None for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "no usage here"


async def test_streamed_tool_call_deltas_reassemble(fake: FakeLLM) -> None:
    fake.script(
        Reply(
            tool_calls=[
                ToolCallSpec("get_weather", {"city": "Paris", "unit": "celsius"}),
                ToolCallSpec("remember", '{"fact": "likes tea"', id="call_mem"),
            ],
            reasoning_content="thinking",
        )
    )
    async with make_client(fake) as client:
        stream = await client.chat.completions.create(
            model="m", messages=MESSAGES, tools=[WEATHER_TOOL], stream=True
        )
        chunks = [chunk async for chunk in stream]

    calls: dict[int, dict[str, str]] = {}
    argument_pieces: dict[int, int] = {}
    reasoning = ""
    finish_reasons = []
    for chunk in chunks:
        choice = chunk.choices[0]
        if choice.finish_reason:
            finish_reasons.append(choice.finish_reason)
        reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
        for delta in choice.delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            if delta.id:
                call["id"] = delta.id
            if delta.function and delta.function.name:
                call["name"] += delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
                argument_pieces[delta.index] = argument_pieces.get(delta.index, 0) + 1

    assert finish_reasons == ["tool_calls"]
    assert reasoning == "thinking"
    assert sorted(calls) == [0, 1]
    assert calls[0]["name"] == "get_weather"
    assert calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    assert calls[1] == {"id": "call_mem", "name": "remember", "arguments": '{"fact": "likes tea"'}
    assert argument_pieces[0] >= 2
    assert argument_pieces[1] >= 2


async def test_429_with_retry_after_ms_is_retried_by_sdk(fake: FakeLLM) -> None:
    fake.script(Failure(429, "slow down", retry_after_ms=10), Reply(text="after retry"))
    async with make_client(fake, max_retries=2) as client:
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.choices[0].message.content == "after retry"
    assert len(fake.requests) == 2
    assert fake.requests[0] == fake.requests[1]


async def test_429_carries_retry_headers_and_error_body(fake: FakeLLM) -> None:
    fake.script(Failure(429, "slow down", code="rate_limit_exceeded", retry_after_ms=1500))
    async with make_client(fake) as client:
        with pytest.raises(openai.RateLimitError) as excinfo:
            await client.chat.completions.create(model="m", messages=MESSAGES)

    error = excinfo.value
    assert error.status_code == 429
    assert error.code == "rate_limit_exceeded"
    assert error.response.headers["retry-after-ms"] == "1500"
    assert error.response.headers["retry-after"] == "2"
    assert error.response.headers["x-request-id"]
    assert "slow down" in error.message


async def test_400_context_length_exceeded(fake: FakeLLM) -> None:
    fake.script(Failure(400, "maximum context length exceeded", code="context_length_exceeded"))
    async with make_client(fake, max_retries=2) as client:
        with pytest.raises(openai.BadRequestError) as excinfo:
            await client.chat.completions.create(model="m", messages=MESSAGES)

    assert excinfo.value.code == "context_length_exceeded"
    assert excinfo.value.type == "invalid_request_error"
    assert excinfo.value.status_code == 400
    assert len(fake.requests) == 1  # a 400 is not retried


async def test_delay_longer_than_client_timeout_raises_timeout(fake: FakeLLM) -> None:
    fake.script(Reply(text="too late", delay_seconds=30))
    async with make_client(fake, max_retries=0, timeout=0.2) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="m", messages=MESSAGES)

    assert len(await fake.wait_for_requests(1)) == 1


async def test_delayed_reply_within_timeout_succeeds(fake: FakeLLM) -> None:
    fake.script(Reply(text="eventually", delay_seconds=0.05))
    async with make_client(fake) as client:
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.choices[0].message.content == "eventually"


async def test_down_gives_503_without_consuming_the_queue(fake: FakeLLM) -> None:
    fake.script(Reply(text="after the outage"))
    fake.down = True
    async with make_client(fake) as client:
        with pytest.raises(openai.InternalServerError) as excinfo:
            await client.chat.completions.create(model="m", messages=MESSAGES)
        assert excinfo.value.status_code == 503
        assert isinstance(excinfo.value, openai.APIStatusError)
        assert fake.queued == 1

        fake.down = False
        completion = await client.chat.completions.create(model="m", messages=MESSAGES)

    assert completion.choices[0].message.content == "after the outage"
    assert len(fake.requests) == 2


async def test_wait_for_requests_times_out_when_nothing_comes(fake: FakeLLM) -> None:
    with pytest.raises(TimeoutError, match=r"expected 1 chat completion request\(s\).*got 0"):
        await fake.wait_for_requests(1, timeout=0.05)


async def test_wait_for_requests_wakes_up_on_arrival(fake: FakeLLM) -> None:
    async with make_client(fake) as client:
        task = asyncio.create_task(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "ping"}]
            )
        )
        requests = await fake.wait_for_requests(1)
        completion = await task

    assert len(requests) == 1
    assert fake.last_user_text(requests[0]) == "ping"
    assert completion.choices[0].message.content == "ok"


async def test_models_endpoint_lists_fake_model(fake: FakeLLM) -> None:
    async with make_client(fake) as client:
        models = await client.models.list()

    assert [model.id for model in models.data] == ["fake-model"]
    assert fake.requests == []


async def test_last_user_text_handles_content_parts_and_missing_user(fake: FakeLLM) -> None:
    request = {
        "messages": [
            {"role": "user", "content": "older"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look at "},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                    {"type": "text", "text": "this"},
                ],
            },
            {"role": "assistant", "content": "sure"},
        ]
    }
    assert fake.last_user_text(request) == "look at this"
    assert fake.last_user_text({"messages": [{"role": "system", "content": "x"}]}) == ""
    with pytest.raises(LookupError):
        fake.last_user_text()


async def test_script_rejects_other_items(fake: FakeLLM) -> None:
    with pytest.raises(TypeError):
        fake.script("not a reply")  # type: ignore[arg-type]
    assert fake.queued == 0


async def test_close_is_idempotent() -> None:
    llm = FakeLLM()
    await llm.start()
    await llm.close()
    await llm.close()


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"type": "function", "function": {"name": "x", "parameters": {"type": "array"}}}],
         "schema must be a JSON Schema of 'type: \"object\"'"),
        ([{"type": "function", "function": {"name": "bad name!"}}], "does not match pattern"),
        ([{"type": "retrieval"}], "expected a function tool"),
    ],
)  # fmt: skip
async def test_tools_the_real_api_refuses_get_a_400(tools: list[Any], message: str) -> None:
    async with FakeLLM() as llm:
        client = AsyncOpenAI(base_url=llm.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError, match=re.escape(message)):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], tools=tools
            )
