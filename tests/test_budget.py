"""Cost control: a partner's daily token budget and a user's hourly message limit stop model
calls; the partner says it is resting once, and the owner sees it in /admin status."""

from __future__ import annotations

import time
from typing import Any

from bot.budget import DEFAULT_RESTING_LINE
from tests.admin_support import admin, partner_dir
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply, ToolCallSpec


def set_budget(harness: Harness, tokens: int, resting: str | None = None) -> None:
    preset = partner_dir(harness) / "preset.yml"
    extra = f"daily_token_budget: {tokens}\n"
    if resting:
        extra += f"resting_message: {resting}\n"
    preset.write_text(preset.read_text() + extra)
    harness.app.catalog.reload()


async def send(harness: Harness, user: int, text: str, name: str = "Alice") -> list[str]:
    before = len(harness.channel.sent)
    await harness.send(dm(user, text, name=name))
    await harness.settle()
    return [m.text for m in harness.channel.sent[before:]]


async def test_over_budget_the_partner_rests_once_without_calling_the_model(
    harness: Harness,
) -> None:
    set_budget(harness, 50)
    harness.llm.script(Reply(text="Hello!", prompt_tokens=100, completion_tokens=5))
    assert await send(harness, 42, "hi") == ["Hello!"]
    assert await send(harness, 42, "are you there?") == [DEFAULT_RESTING_LINE]
    assert await send(harness, 42, "hello??") == []
    assert len(harness.llm.requests) == 1
    assert await send(harness, 43, "hi Mira", name="Bob") == [DEFAULT_RESTING_LINE]
    assert len(harness.llm.requests) == 1
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    kept = [m.text for m in await harness.app.store.session_messages(session.id)]
    assert "hello??" in kept  # kept in the conversation, just not answered
    assert await harness.app.store.pending_count() == 0
    status = await admin(harness, "/admin status")
    assert "Mira: 105 of 50 tokens — RESTING (budget used up)" in status


async def test_the_resting_line_comes_from_the_preset(harness: Harness) -> None:
    set_budget(harness, 10, resting="Mira is napping in the sun. Later!")
    harness.llm.script(Reply(text="Hi", prompt_tokens=20, completion_tokens=1))
    await send(harness, 42, "hi")
    assert await send(harness, 42, "again") == ["Mira is napping in the sun. Later!"]


async def test_the_budget_resets_at_the_owners_midnight(harness: Harness) -> None:
    set_budget(harness, 10)
    harness.llm.script(Reply(text="Hi", prompt_tokens=20, completion_tokens=1))
    await send(harness, 42, "hi")
    assert await send(harness, 42, "again") == [DEFAULT_RESTING_LINE]
    budget = harness.app.runner.budget
    assert budget is not None
    budget.clock = lambda: time.time() + 86_400
    harness.llm.script(Reply(text="Good morning!", prompt_tokens=1, completion_tokens=1))
    assert await send(harness, 42, "morning") == ["Good morning!"]


async def test_a_consult_of_a_resting_partner_is_refused_in_the_tool(harness: Harness) -> None:
    set_budget(harness, 10)
    harness.llm.script(Reply(text="Hi", prompt_tokens=20, completion_tokens=1))
    await send(harness, 42, "hi")
    ask = ToolCallSpec("consult_partner", {"partner": "example", "question": "hi?"})
    harness.llm.script(Reply(tool_calls=[ask]), Reply(text="she is resting"))
    await send(harness, OWNER_ID, "ask Mira", name="Owner")
    tool_result = harness.llm.requests[-1]["messages"][-1]["content"]
    assert "Mira is resting: its token budget for today is used up" in tool_result
    assert "resting" in await admin(harness, "/admin consult example hello")


async def test_a_user_over_the_hourly_limit_gets_one_resting_line(harness_factory: Any) -> None:
    harness = await harness_factory(access={"dm_policy": "open", "user_messages_per_hour": 2})
    harness.llm.script(Reply(text="one"), Reply(text="two"))
    assert await send(harness, 42, "first") == ["one"]
    assert await send(harness, 42, "second") == ["two"]
    assert await send(harness, 42, "third") == [DEFAULT_RESTING_LINE]
    assert await send(harness, 42, "fourth") == []
    assert len(harness.llm.requests) == 2
    harness.llm.script(Reply(text="hi Bob"))
    assert await send(harness, 43, "hello", name="Bob") == ["hi Bob"]
    status = await admin(harness, "/admin status")
    assert "Rate limit 2 messages/hour; resting in the last hour: example for test:42" in status


async def test_the_owner_is_never_rate_limited(harness_factory: Any) -> None:
    harness = await harness_factory(access={"dm_policy": "open", "user_messages_per_hour": 1})
    for text in ("one", "two", "three"):
        harness.llm.script(Reply(text=f"re {text}"))
        assert await send(harness, OWNER_ID, text, name="Owner") == [f"re {text}"]
