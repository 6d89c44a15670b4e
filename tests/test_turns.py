"""A message in, one reply out: the chat loop and dispatcher through a recording channel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.events import ChatRef
from bot.store import MessageRow
from partners.tools import user_memory_file
from tests.conftest import Harness, dm, group_message
from tests.fakes.fake_llm import Failure, Reply, ToolCallSpec


async def test_dm_gets_one_reply_from_the_partner(harness: Harness) -> None:
    harness.llm.script(Reply(text="Hello Alice!"))
    await harness.send(dm(42, "hi there"))
    sent = await harness.channel.wait_sent(1)
    await harness.settle()
    assert [m.text for m in sent] == ["Hello Alice!"]
    assert sent[0].partner_name == "Mira"
    request = harness.llm.requests[0]
    assert request["messages"][0]["role"] == "system"
    assert "hi there" in harness.llm.last_user_text()


async def test_llm_down_gives_one_apology_and_keeps_the_message(harness: Harness) -> None:
    harness.llm.script(Failure(503), Failure(503))
    await harness.send(dm(42, "are you awake?"))
    sent = await harness.channel.wait_sent(1)
    await harness.settle()
    assert len(sent) == 1 and "Sorry" in sent[0].text
    hits = await harness.app.store.search("example", "awake", None, 10)
    assert any("are you awake?" in h.text for h in hits)


async def test_tool_rounds_stop_at_the_limit_then_answer_without_tools(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(llm={"max_tool_rounds": 2})
    loop_call = ToolCallSpec("partner_search", {"query": "anything"})
    harness.llm.script(
        Reply(tool_calls=[loop_call]), Reply(tool_calls=[loop_call]), Reply(text="final answer")
    )
    await harness.send(dm(42, "search forever"))
    await harness.settle()
    requests = harness.llm.requests
    assert len(requests) == 3
    assert "tools" in requests[0] and "tools" in requests[1]
    assert "tools" not in requests[2]
    assert harness.channel.texts() == ["final answer"]


async def test_malformed_tool_arguments_go_back_as_a_tool_error(harness: Harness) -> None:
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_memorize", '{"op": "add", "text": ')]),
        Reply(tool_calls=[ToolCallSpec("no_such_tool", {})]),
        Reply(text="sorry about that"),
    )
    await harness.send(dm(42, "remember something"))
    await harness.settle()
    second, third = harness.llm.requests[1], harness.llm.requests[2]
    assert "not valid JSON" in second["messages"][-1]["content"]
    assert "unknown tool 'no_such_tool'" in third["messages"][-1]["content"]
    assert harness.channel.texts() == ["sorry about that"]


async def test_rate_limited_llm_is_retried_then_answers(harness_factory: Any) -> None:
    harness = await harness_factory(llm={"max_retries": 2})
    harness.llm.script(Failure(429, retry_after_ms=10), Reply(text="there you are"))
    await harness.send(dm(42, "hello?"))
    await harness.settle()
    assert len(harness.llm.requests) == 2
    assert harness.channel.texts() == ["there you are"]


async def test_context_too_long_trims_history_and_retries_once(harness: Harness) -> None:
    for i in range(6):
        harness.llm.script(Reply(text=f"answer {i}"))
        await harness.send(dm(42, f"message {i}"))
        await harness.settle()
    harness.llm.script(
        Failure(400, message="maximum context length exceeded", code="context_length_exceeded"),
        Reply(text="short again"),
    )
    await harness.send(dm(42, "one more"))
    await harness.settle()
    failed, retried = harness.llm.requests[-2], harness.llm.requests[-1]
    assert len(retried["messages"]) < len(failed["messages"])
    assert "one more" in retried["messages"][-1]["content"]
    assert harness.channel.texts()[-1] == "short again"


async def test_duplicate_platform_message_gets_one_reply(harness: Harness) -> None:
    message = dm(42, "hello once")
    harness.llm.script(Reply(text="hi!"))
    await harness.send(message)
    await harness.send(message)
    await harness.settle()
    await harness.send(message)
    await harness.settle()
    assert harness.channel.texts() == ["hi!"]
    assert len(harness.llm.requests) == 1


async def test_messages_during_a_turn_coalesce_into_the_next_turn(harness: Harness) -> None:
    release = asyncio.Event()

    async def slow_then_fast(request: dict[str, Any]) -> Reply:
        if len(harness.llm.requests) == 1:
            await release.wait()
        return Reply(text=f"reply to {harness.llm.last_user_text(request)}")

    harness.llm.responder = slow_then_fast
    await harness.send(dm(42, "first"))
    await harness.llm.wait_for_requests(1)
    await harness.send(dm(42, "second"))
    await harness.send(dm(42, "third"))
    release.set()
    await harness.settle()
    assert len(harness.llm.requests) == 2
    users = [m["content"] for m in harness.llm.requests[1]["messages"] if m["role"] == "user"]
    assert users[-2].endswith("second") and users[-1].endswith("third")
    assert len(harness.channel.texts()) == 2


async def test_chats_run_concurrently_but_each_in_order(harness: Harness) -> None:
    harness.llm.responder = lambda request: Reply(text="echo " + request["messages"][-1]["content"])
    for i in range(5):
        for user in (1001, 1002, 1003):
            await harness.send(dm(user, f"n{i}"))
    await harness.settle()
    for user in ("1001", "1002", "1003"):
        replies = harness.channel.texts(user)
        numbers = [int(text.rsplit("n", 1)[1]) for text in replies]
        assert numbers == sorted(numbers) and numbers[-1] == 4


async def test_history_reaches_the_next_turn(harness: Harness) -> None:
    harness.llm.script(Reply(text="Nice to meet you, Sam"), Reply(text="You're Sam"))
    await harness.send(dm(42, "I'm Sam"))
    await harness.settle()
    await harness.send(dm(42, "who am I?"))
    await harness.settle()
    roles = [(m["role"], m["content"]) for m in harness.llm.requests[1]["messages"][1:]]
    assert roles[0][0] == "user" and roles[0][1].endswith("I'm Sam")
    assert roles[1] == ("assistant", "Nice to meet you, Sam")
    assert harness.llm.requests[0]["messages"][0] == harness.llm.requests[1]["messages"][0]


async def test_new_session_freezes_a_new_prompt_and_carries_recent_turns(harness: Harness) -> None:
    harness.llm.script(Reply(text="first reply"))
    await harness.send(dm(42, "first message"))
    await harness.settle()
    partner_dir = harness.app.catalog.require("example").dir
    with (partner_dir / "SOUL.md").open("a") as handle:
        handle.write("\nLoves astronomy.\n")
    harness.llm.script(Reply(text="same session"))
    await harness.send(dm(42, "second"))
    await harness.settle()
    assert "astronomy" not in harness.llm.requests[1]["messages"][0]["content"]
    await harness.send(dm(42, "/new"))
    harness.llm.script(Reply(text="new session"))
    await harness.send(dm(42, "third"))
    await harness.settle()
    third = harness.llm.requests[2]["messages"]
    assert "astronomy" in third[0]["content"]
    assert any(m["content"] == "first reply" for m in third)


async def test_idle_session_ends_and_a_new_one_starts(harness: Harness) -> None:
    harness.llm.script(Reply(text="a"), Reply(text="b"))
    await harness.send(dm(42, "hello"))
    await harness.settle()
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    await harness.app.store._db.execute(
        "UPDATE sessions SET last_active_at = last_active_at - 7 * 3600 WHERE id = ?",
        (session.id,),
    )
    await harness.send(dm(42, "back again"))
    await harness.settle()
    newer = await harness.app.store.open_session("test:42", "example")
    assert newer is not None and newer.id != session.id and newer.carry_from == session.id
    ended = await harness.app.store.session(session.id)
    assert ended is not None and ended.ended_at is not None


async def test_usage_is_recorded_per_partner_and_kind(harness: Harness) -> None:
    harness.llm.script(Reply(text="hi", prompt_tokens=120, completion_tokens=7))
    await harness.send(dm(42, "hello"))
    await harness.settle()
    rows = await harness.app.store.usage("2000-01-01")
    assert [
        (r["partner_id"], r["kind"], r["prompt_tokens"], r["completion_tokens"]) for r in rows
    ] == [("example", "chat", 120, 7)]


async def test_group_message_not_addressed_is_context_not_answered(harness: Harness) -> None:
    await harness.app.store.bind("test", "g1", "example", "command")
    await harness.send(group_message("g1", 7, "anyone seen my umbrella?", addressed=False))
    await harness.settle()
    assert harness.llm.requests == [] and harness.channel.sent == []
    harness.llm.script(Reply(text="It's by the door"))
    await harness.send(group_message("g1", 8, "Mira, can you help Bob?", name="Carol"))
    await harness.settle()
    contents = [m["content"] for m in harness.llm.requests[0]["messages"]]
    assert any("umbrella" in c and "not addressed to you" in c for c in contents)
    assert "· Carol]" in contents[-1]
    assert harness.channel.texts() == ["It's by the door"]


async def test_unbound_group_is_ignored(harness: Harness) -> None:
    await harness.send(group_message("g9", 7, "Mira hello?"))
    await harness.settle()
    assert harness.llm.requests == [] and harness.channel.sent == []


async def test_mention_gating_off_answers_every_group_message(harness_factory: Any) -> None:
    harness = await harness_factory(access={"mention_gating": False})
    await harness.app.store.bind("test", "g1", "example", "command")
    harness.llm.script(Reply(text="I heard you"))
    await harness.send(group_message("g1", 7, "just chatting here", addressed=False))
    await harness.settle()
    assert harness.channel.texts() == ["I heard you"]


# ---- nothing stays pending forever (docs/architecture.md "Decisions")
# -----------------------------

NESTING_DEPTH = 5000
"""Deeper than Python's recursion limit: json.loads raises RecursionError, not a decode error."""


async def test_deeply_nested_tool_arguments_go_back_as_a_tool_error(harness: Harness) -> None:
    nested = '{"op": ' + "[" * NESTING_DEPTH + "]" * NESTING_DEPTH + "}"
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_memorize", nested)]),
        Reply(text="that did not work, sorry"),
    )
    await harness.send(dm(42, "remember this"))
    await harness.settle()
    assert len(harness.llm.requests) == 2
    tool_result = harness.llm.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert tool_result["content"].startswith("error: ") and "nested" in tool_result["content"]
    assert harness.channel.texts() == ["that did not work, sorry"]
    assert harness.app.dispatcher.turns_failed == 0


async def inbound_of(harness: Harness, user_id: int) -> list[MessageRow]:
    rows = await harness.app.store.user_messages("example", f"test:{user_id}")
    return [row for row in rows if row.role == "user"]


def break_user_memory(harness: Harness, user_id: int) -> Path:
    """Make the user's memory file unreadable (a directory where the file should be): every
    turn in that DM raises while it assembles the session's prompt."""
    partner = harness.app.catalog.require("example")
    path = user_memory_file(partner, f"test:{user_id}").path
    path.mkdir(parents=True)
    return path


async def test_a_tool_that_raises_goes_back_to_the_model_as_a_tool_error(
    harness: Harness,
) -> None:
    harness.llm.script(Reply(text="hello"))
    await harness.send(dm(42, "hi"))  # the session and its prompt exist from here on
    await harness.settle()
    break_user_memory(harness, 42)
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_read", {})]),
        Reply(text="my notes are out of reach"),
    )
    await harness.send(dm(42, "what do you know about me?"))
    await harness.settle()
    tool_result = harness.llm.requests[-1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert tool_result["content"].startswith("error: partner_read failed (IsADirectoryError)")
    assert harness.channel.texts() == ["hello", "my notes are out of reach"]


async def test_a_turn_that_fails_every_time_is_given_up_after_three_attempts(
    harness: Harness,
) -> None:
    broken = break_user_memory(harness, 42)
    await harness.send(dm(42, "can you hear me?"))
    await harness.settle()

    [apology] = harness.channel.texts()
    assert apology.startswith("Sorry")
    [inbound] = await inbound_of(harness, 42)
    assert inbound.status == "failed"
    assert await harness.app.store.turn_attempts(inbound.id) == 3
    [audit] = await harness.app.store.audit_rows("turn_failed")
    assert audit["detail"]["messages"] == [inbound.id]
    assert audit["detail"]["attempts"] == 3
    assert "IsADirectoryError" in audit["detail"]["error"]
    assert harness.llm.requests == []
    assert await harness.app.store.pending_count() == 0
    assert harness.app.dispatcher.turns_failed == 3  # what /admin status shows

    broken.rmdir()  # the owner repairs the file: the chat is served again
    harness.llm.script(Reply(text="yes, loud and clear"))
    await harness.send(dm(42, "and now?"))
    await harness.settle()
    assert harness.channel.texts() == [apology, "yes, loud and clear"]
    assert "can you hear me?" not in str(harness.llm.requests[0]["messages"])
    assert len(await harness.app.store.audit_rows("turn_failed")) == 1


async def test_a_turn_that_fails_twice_then_works_gets_no_apology(harness: Harness) -> None:
    harness.channel.fail_next_stream = [RuntimeError("preview broke"), RuntimeError("again")]
    harness.llm.script(Reply(text="here I am"))
    await harness.send(dm(42, "hello?"))
    await harness.settle()
    assert harness.channel.texts() == ["here I am"]
    [inbound] = await inbound_of(harness, 42)
    assert inbound.status == "done"
    assert await harness.app.store.turn_attempts(inbound.id) == 2
    assert await harness.app.store.audit_rows("turn_failed") == []
    assert len(harness.llm.requests) == 1
    assert harness.app.dispatcher.turns_failed == 2


async def test_a_stopped_turn_is_answered_at_once_with_a_note_and_the_chat_goes_on(
    harness: Harness,
) -> None:
    harness.llm.script(Reply(text="Once upon a time…", delay_seconds=60), Reply(text="Hi again."))
    chat = ChatRef("test", "42", "dm")
    assert not await harness.app.gateway.stop_turn(chat)  # nothing runs yet
    await harness.send(dm(42, "tell me a very long story"))
    await harness.llm.wait_for_requests(1)
    assert await harness.app.gateway.stop_turn(chat)
    [stopped] = await harness.channel.wait_sent(1)
    assert stopped.text == "(stopped)"
    await harness.settle()
    await harness.send(dm(42, "never mind, hello"))
    await harness.settle()
    assert harness.channel.texts("42") == ["(stopped)", "Hi again."]
    # the stopped question stays in the history, answered by nothing the partner said
    history = harness.llm.requests[-1]["messages"]
    assert [m["role"] for m in history[1:]] == ["user", "user"]
