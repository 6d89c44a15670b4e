"""The OpenAI-compatible client: one call, with retries, optional streaming and usage.

The openai SDK retries 408/409/429/5xx and connection errors itself, with backoff that honours
``retry-after`` and ``retry-after-ms``; we set how often and how long. Its exceptions become our
own here (``LLMUnavailable``, ``ContextTooLong``, ``LLMRejected``), and its response objects
become :class:`Completion`, so nothing past the chat loop knows the SDK. Provider quirks:
``reasoning_content`` (DeepSeek) is ignored, and tool-call arguments are passed on as raw
strings for the tool layer to validate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from bot.config.services import LLMConfig
from bot.events import ToolCall, Usage, storable

logger = logging.getLogger(__name__)

NO_KEY = "not-set"
CHAT_COMPLETIONS = "/chat/completions"
"""Posted through the client's plain ``post`` (documented for any endpoint): the request is
already JSON-ready, and ``chat.completions.create`` would spend more CPU re-validating the
nested message and tool types than the rest of a turn costs. Retries, timeouts, errors and the
typed response are the same."""
Delta = Callable[[str], Awaitable[None]]


class LLMError(Exception):
    """The model could not give an answer."""


class LLMUnavailable(LLMError):
    """The endpoint is down, overloaded, unreachable or refused us, after retries."""


class ContextTooLong(LLMError):
    """The provider says the prompt is longer than the model's context."""


class LLMRejected(LLMError):
    """The provider refused the request itself (400-class other than context length)."""


@dataclass(frozen=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...]
    usage: Usage
    model: str


class LLMClient:
    def __init__(self, config: LLMConfig) -> None:
        key = config.api_key.get_secret_value() if config.api_key else NO_KEY
        self.default_model = config.model
        self._client = openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=key,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )

    async def close(self) -> None:
        await self._client.close()

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        on_delta: Delta | None = None,
        json_mode: bool = False,
        max_tokens: int | None = None,
        time_limit: float | None = None,
        max_retries: int | None = None,
    ) -> Completion:
        """One answer. ``max_tokens`` caps what it may write; ``time_limit`` (seconds) and
        ``max_retries`` replace ``llm.timeout`` and ``llm.max_retries`` for this call (a small
        question that must not hold anything up; not with ``on_delta``)."""
        request: dict[str, Any] = {"model": model or self.default_model, "messages": messages}
        if tools:
            request["tools"] = tools
        if json_mode:
            request["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        options: openai.RequestOptions = {}
        if time_limit is not None:
            options["timeout"] = time_limit
        if max_retries is not None:
            options["max_retries"] = max_retries
        try:
            if on_delta is None:
                return await self._complete(request, options)
            return await self._stream(request, on_delta)
        except openai.BadRequestError as exc:
            if _is_context_error(exc):
                raise ContextTooLong(str(exc)) from exc
            raise LLMRejected(f"the LLM endpoint rejected the request: {exc}") from exc
        except openai.AuthenticationError as exc:
            raise LLMUnavailable(
                "the LLM endpoint refused the API key; set OPENAI_API_KEY or llm.api_key"
            ) from exc
        except openai.NotFoundError as exc:
            # a partner's own model (preset.yml) is not llm.model: name the setting that chose it
            setting = (
                "llm.model" if request["model"] == self.default_model else "the partner's model"
            )
            raise LLMUnavailable(
                f"the LLM endpoint does not know model {request['model']!r} or the path; check "
                f"{setting} and llm.base_url"
            ) from exc
        except (openai.APIConnectionError, openai.APIStatusError) as exc:
            raise LLMUnavailable(f"the LLM endpoint failed: {exc}") from exc

    async def _complete(
        self, request: dict[str, Any], options: openai.RequestOptions | None = None
    ) -> Completion:
        try:
            response = await self._client.post(
                CHAT_COMPLETIONS, body=request, cast_to=ChatCompletion, options=options or {}
            )
        except json.JSONDecodeError as exc:  # a proxy's HTML page, an empty body
            raise NotACompletion(f"its answer is not JSON ({exc.msg})") from exc
        return completion_of(response, request["model"])

    async def _stream(self, request: dict[str, Any], on_delta: Delta) -> Completion:
        body = {**request, "stream": True, "stream_options": {"include_usage": True}}
        stream = await self._client.post(
            CHAT_COMPLETIONS,
            body=body,
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=openai.AsyncStream[ChatCompletionChunk],
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage = Usage()
        model = request["model"]
        async for chunk in stream:
            if chunk.usage:
                usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
            model = chunk.model or model
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                await on_delta(delta.content)
            for part in delta.tool_calls or ():
                slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                if part.id:
                    slot["id"] = part.id
                if part.function and part.function.name:
                    slot["name"] += part.function.name
                if part.function and part.function.arguments:
                    slot["arguments"] += part.function.arguments
        tool_calls = tuple(
            ToolCall(slot["id"] or f"call_{index}", slot["name"], slot["arguments"])
            for index, slot in sorted(calls.items())
        )
        return Completion(storable("".join(text)), tool_calls, usage, model)


class NotACompletion(LLMUnavailable):
    """The endpoint answered 200 with something that is not a chat completion."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"the LLM endpoint answered with something that is not a chat completion: {what}"
        )


def completion_of(response: object, model: str) -> Completion:
    """Our Completion from the SDK's response object, which the SDK builds without validating
    it: every part read is checked, so a server's odd JSON (a bare error object, wrong types,
    no message) costs the turn an apology, not a crash."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise NotACompletion("no choices")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    tool_calls = getattr(message, "tool_calls", None) or []
    if message is None or not isinstance(content, str | None) or not isinstance(tool_calls, list):
        raise NotACompletion("no message with text or tool calls")
    calls = []
    for call in tool_calls:
        function = getattr(call, "function", None)  # custom (non-function) calls are skipped
        if function is None:
            continue
        name, arguments = getattr(function, "name", None), getattr(function, "arguments", None)
        if not isinstance(name, str) or not isinstance(arguments, str | None):
            raise NotACompletion("a tool call without a name or with arguments that are not text")
        calls.append(ToolCall(str(getattr(call, "id", "") or ""), name, arguments or ""))
    reported = getattr(response, "usage", None)
    prompt = getattr(reported, "prompt_tokens", None)
    completion = getattr(reported, "completion_tokens", None)
    usage = Usage()
    if isinstance(prompt, int) and isinstance(completion, int):
        usage = Usage(prompt, completion)
    answered_by = getattr(response, "model", None)
    return Completion(
        text=storable(content or ""),
        tool_calls=tuple(calls),
        usage=usage,
        model=answered_by if isinstance(answered_by, str) and answered_by else model,
    )


def _is_context_error(exc: openai.BadRequestError) -> bool:
    code = getattr(exc, "code", None) or ""
    text = f"{code} {exc}".lower()
    return "context_length" in text or "context length" in text or "maximum context" in text


DEFAULT_BASE_URL = "https://api.openai.com/v1"
SETUP_HINT = (
    "set OPENAI_API_KEY for OpenAI, or point llm.base_url in config.toml at another "
    "OpenAI-compatible endpoint (a local Ollama is http://127.0.0.1:11434/v1, vLLM "
    "http://127.0.0.1:8000/v1)"
)


def configuration_problem(config: LLMConfig) -> str | None:
    """What is missing before any call can work, in words the owner can act on."""
    if config.api_key is None and config.base_url.rstrip("/") == DEFAULT_BASE_URL:
        return f"No LLM is configured: {SETUP_HINT}."
    return None
