"""Cost control: a partner's daily token budget and a user's hourly message limit stop model
calls; the partner says it is resting once, and the owner sees it in /admin status. Every kind
of usage is booked on the owner's calendar, the one the budget reads."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.turn.budget import DEFAULT_RESTING_LINE
from partners.memory import MemoryFile
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


FAR_EAST = "Pacific/Kiritimati"
"""UTC+14: at noon UTC (the owner's zone in the tests) the partner's calendar is a day ahead."""
NOON_UTC = datetime(2026, 3, 10, 12, 0, tzinfo=UTC).timestamp()
OWNERS_DAY = "2026-03-10"


def far_east_partner(harness: Harness, tokens: int) -> None:
    set_budget(harness, tokens)
    preset = partner_dir(harness) / "preset.yml"
    preset.write_text(preset.read_text() + f"timezone: {FAR_EAST}\n")
    harness.app.catalog.reload()


async def test_review_tokens_count_against_the_same_days_budget_as_chat_tokens(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(memory={"auto_memory": True})
    far_east_partner(harness, 1000)
    app = harness.app
    app.runner.clock = app.reviewer.clock = lambda: NOON_UTC
    budget = app.runner.budget
    assert budget is not None
    budget.clock = lambda: NOON_UTC
    harness.llm.script(Reply(text="Congratulations!", prompt_tokens=300, completion_tokens=100))
    await send(harness, 42, "I got the job at the observatory!")
    session = await app.store.open_session("test:42", "example")
    assert session is not None
    answer = json.dumps({"journal": {"summary": "Alice got the observatory job"}, "memory": []})
    harness.llm.script(Reply(text=answer, prompt_tokens=500, completion_tokens=200))
    await app.reviewer.review(session.id)

    booked = {(row["day"], row["kind"]) for row in await app.store.usage("2000-01-01")}
    assert booked == {(OWNERS_DAY, "chat"), (OWNERS_DAY, "review")}
    assert await budget.tokens_today() == {"example": 1100}
    assert await budget.over_budget(app.catalog.require("example"))
    assert (app.catalog.require("example").dir / "memory" / "2026-03-11.md").exists()


async def test_nightly_tokens_count_on_the_owners_day(harness_factory: Any) -> None:
    # 11:00 UTC on 10 March: 23:00 on the 9th for the owner (UTC-12), 01:00 on the 11th for
    # the partner (UTC+14), whose nightly pass summarises its yesterday, the 10th
    harness = await harness_factory(memory={"auto_memory": True}, owner={"timezone": "Etc/GMT+12"})
    far_east_partner(harness, 1000)
    root = partner_dir(harness)
    for fact in ("likes tea", "likes tea a lot"):
        await harness.app.memory.add(MemoryFile(root, "MEMORY.md"), fact, reason="", source="t")
    (root / "memory" / "2026-03-10.md").write_text("# 2026-03-10\n## 09:00 · chat\n> Summary: x\n")
    harness.llm.script(
        Reply(text='{"ops": []}', prompt_tokens=40, completion_tokens=2),
        Reply(text='{"summary": "A quiet day"}', prompt_tokens=50, completion_tokens=5),
    )
    partner = harness.app.catalog.require("example")
    eleven_utc = datetime(2026, 3, 10, 11, 0, tzinfo=UTC).timestamp()
    result = await harness.app.consolidator.nightly(
        partner, datetime.fromtimestamp(eleven_utc, ZoneInfo(FAR_EAST))
    )

    assert result.day_line == "A quiet day"
    assert {row["day"] for row in await harness.app.store.usage("2000-01-01")} == {"2026-03-09"}
    assert await harness.app.store.tokens_on("2026-03-09") == {"example": 97}
