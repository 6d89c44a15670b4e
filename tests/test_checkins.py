"""Check-ins and reminders: every gate is code, silence is never shown, reminders fire once."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from adapters.base import DeliveryError
from partners.tools import user_memory_file
from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Reply

PRESET = """name: Mira
proactive:
  enabled: true
  window: "10:00-20:00"
  quiet_hours: "22:00-08:00"
  max_per_day: 1
  max_per_week: 2
  idle_hours: 24
"""
NOON = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0).timestamp()
"""Noon today (UTC); the tests' messages are sent now, so NOON + 2 days is a quiet user."""
DAY = 86400.0


async def setup(harness: Harness, *, opt_in: bool = True, preset: str = PRESET) -> None:
    partner = harness.app.catalog.require("example")
    (partner.dir / "preset.yml").write_text(preset)
    harness.app.catalog.reload()
    harness.llm.script(Reply(text="hi!"))
    await harness.send(dm(42, "hello there"))
    await harness.settle()
    if opt_in:
        await harness.send(dm(42, "/checkins on"))
        await harness.send(dm(42, "/timezone UTC"))
    harness.channel.sent.clear()


async def run_at(harness: Harness, when: float) -> dict[str, int]:
    harness.app.checkins.clock = lambda: when
    return await harness.app.checkins.run()


async def test_a_quiet_user_gets_one_checkin_when_every_gate_passes(harness: Harness) -> None:
    await setup(harness)
    requests = len(harness.llm.requests)
    harness.llm.script(Reply(text="How did the interview go?"))
    outcome = await run_at(harness, NOON + 2 * DAY)
    assert outcome == {"sent": 1}
    assert len(harness.llm.requests) == requests + 1
    assert [m.text for m in harness.channel.sent] == ["How did the interview go?"]
    assert harness.channel.sent[0].chat.chat_id == "42"
    rows = await harness.app.store.usage("2000-01-01")
    assert any(r["kind"] == "checkin" for r in rows)


async def gate(harness: Harness, when: float) -> tuple[dict[str, int], int]:
    requests = len(harness.llm.requests)
    outcome = await run_at(harness, when)
    return outcome, len(harness.llm.requests) - requests


async def test_quiet_hours_and_window_stop_the_model_call(harness: Harness) -> None:
    await setup(harness)
    assert await gate(harness, NOON + 2 * DAY + 11 * 3600) == ({"quiet hours": 1}, 0)
    assert await gate(harness, NOON + 2 * DAY + 9 * 3600) == ({"outside the window": 1}, 0)


async def test_recent_activity_stops_the_model_call(harness: Harness) -> None:
    await setup(harness)
    await answer_at(harness, NOON + 2 * DAY - 3600, "just got home from the trip")
    assert await gate(harness, NOON + 2 * DAY) == ({"recently active": 1}, 0)
    harness.llm.script(Reply(text="How was the trip?"))
    assert await gate(harness, NOON + 3 * DAY) == ({"sent": 1}, 1)  # a day of quiet later


async def test_an_unanswered_checkin_stops_further_ones(harness: Harness) -> None:
    await setup(harness)
    harness.llm.script(Reply(text="Thinking of you"))
    await run_at(harness, NOON + 2 * DAY)
    assert await gate(harness, NOON + 5 * DAY) == ({"last check-in unanswered": 1}, 0)


async def answer_at(harness: Harness, when: float, text: str) -> None:
    """The user writes back at a simulated time."""
    harness.llm.script(Reply(text="glad to hear"))
    base = dm(42, text)
    await harness.send(replace(base, time=datetime.fromtimestamp(when, UTC)))
    await harness.settle()


async def test_daily_and_weekly_caps(harness: Harness) -> None:
    await setup(harness, preset=PRESET.replace("idle_hours: 24", "idle_hours: 0"))
    first = NOON + 2 * DAY
    harness.llm.script(Reply(text="one"))
    assert await run_at(harness, first) == {"sent": 1}
    await answer_at(harness, first + 60, "thanks for asking!")
    assert await gate(harness, first + 3600) == ({"daily cap": 1}, 0)
    harness.llm.script(Reply(text="two"))
    assert await run_at(harness, first + DAY + 600) == {"sent": 1}
    await answer_at(harness, first + DAY + 660, "all good")
    assert await gate(harness, first + 2 * DAY + 1200) == ({"weekly cap": 1}, 0)


async def test_token_budget_stops_the_model_call(harness: Harness) -> None:
    await setup(harness, preset=PRESET + "daily_token_budget: 10\n")
    harness.app.gateway.admin.budget.clock = lambda: NOON + 2 * DAY  # type: ignore[union-attr]
    await harness.app.store.add_usage(
        datetime.fromtimestamp(NOON + 2 * DAY, UTC).date().isoformat(),
        "example",
        "chat",
        "m",
        100,
        100,
    )
    assert await gate(harness, NOON + 2 * DAY) == ({"token budget": 1}, 0)


async def test_no_opt_in_no_checkin(harness: Harness) -> None:
    await setup(harness, opt_in=False)
    assert await gate(harness, NOON + 2 * DAY) == ({}, 0)


async def test_checkins_off_stops_checkins_and_reminders(harness: Harness) -> None:
    await setup(harness)
    await harness.send(dm(42, "/checkins off"))
    await harness.settle()
    assert harness.channel.texts() == ["Mira won't write first any more."]
    harness.llm.script(Reply(text="Thinking of you"))  # what an opted-out user must not get
    assert await gate(harness, NOON + 2 * DAY) == ({}, 0)
    await harness.app.store.add_reminder("example", "test:42", "2099-03-04", "Alice's birthday")
    [reminder] = await harness.app.store.pending_reminders()
    assert await harness.app.checkins.fire_reminder(reminder["id"]) == "check-ins off"
    assert harness.channel.texts() == ["Mira won't write first any more."]


async def test_silence_marker_is_never_delivered(harness: Harness) -> None:
    await setup(harness)
    harness.llm.script(Reply(text="[[silent]]"))
    assert await run_at(harness, NOON + 2 * DAY) == {"silent": 1}
    assert harness.channel.sent == []
    harness.llm.script(Reply(text="Nothing to add [[silent]]"), Reply(text="[[silent]]"))
    await harness.send(dm(42, "are you there?"))
    await harness.settle()
    assert [m.text for m in harness.channel.sent] == ["Nothing to add"]


async def test_unreachable_user_gets_checkins_switched_off(harness: Harness) -> None:
    await setup(harness)
    harness.channel.fail_next = [DeliveryError("403 blocked", retryable=False, unreachable=True)]
    harness.llm.script(Reply(text="Hello?"))
    assert await run_at(harness, NOON + 2 * DAY) == {"undelivered": 1}
    setting = await harness.app.store.checkin_setting("example", "test:42")
    assert setting is not None and not setting["enabled"]
    assert setting["disabled_reason"] == "unreachable"


async def test_birthday_reminder_survives_a_restart_and_fires_once(harness_factory: Any) -> None:
    harness = await harness_factory(memory={"auto_memory": True})
    await setup(harness)
    harness.llm.script(Reply(text="noted"))
    await harness.send(dm(42, "My birthday is on 2099-03-04, don't forget!"))
    await harness.settle()
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    harness.llm.script(
        Reply(
            text=json.dumps(
                {
                    "journal": None,
                    "memory": [],
                    "reminders": [{"date": "2099-03-04", "about": "Alice's birthday"}],
                }
            )
        )
    )
    result = await harness.app.reviewer.review(session.id)
    assert result.reminders == ["2099-03-04"]
    job = harness.app.scheduler.job(f"reminder-{1}")
    assert job.next_run_time.date().isoformat() == "2099-03-04"
    await harness.app.stop()
    again = await harness_factory(memory={"auto_memory": True})
    job = again.app.scheduler.job("reminder-1")
    assert job.next_run_time.hour == 10
    again.llm.script(Reply(text="Happy birthday, Alice!"))
    assert await again.app.checkins.fire_reminder(1) == "sent"
    assert await again.app.checkins.fire_reminder(1) == "already handled"
    assert [m.text for m in again.channel.sent] == ["Happy birthday, Alice!"]


async def test_commands_report_and_validate(harness: Harness) -> None:
    await setup(harness, opt_in=False)
    await harness.send(dm(42, "/timezone Mars/Base"))
    await harness.send(dm(42, "/checkins"))
    await harness.settle()
    texts = [m.text for m in harness.channel.sent]
    assert "unknown time zone" in texts[0]
    assert "are off" in texts[1]


async def test_checkin_tokens_count_on_the_owners_day(harness: Harness) -> None:
    # UTC+14: at noon UTC (the owner's zone) the partner's calendar is already on the next day
    await setup(harness, preset=PRESET + "timezone: Pacific/Kiritimati\n")
    budget = harness.app.runner.budget
    assert budget is not None
    budget.clock = lambda: NOON + 2 * DAY
    harness.llm.script(Reply(text="How was the trip?", prompt_tokens=70, completion_tokens=8))
    assert await run_at(harness, NOON + 2 * DAY) == {"sent": 1}
    assert await budget.tokens_today() == {"example": 78}


async def test_one_users_broken_file_never_stops_the_others_checkins(harness: Harness) -> None:
    await setup(harness)
    harness.llm.script(Reply(text="hi Bob!"))
    await harness.send(dm(43, "hello", name="Bob"))
    await harness.send(dm(43, "/checkins on", name="Bob"))
    await harness.settle()
    partner = harness.app.catalog.require("example")
    user_memory_file(partner, "test:42").path.mkdir(parents=True)  # unreadable: a directory
    harness.channel.sent.clear()

    harness.llm.script(Reply(text="How is the cello going?"))
    outcome = await run_at(harness, NOON + 2 * DAY)

    assert outcome == {"failed": 1, "sent": 1}
    assert [(m.chat.chat_id, m.text) for m in harness.channel.sent] == [
        ("43", "How is the cello going?")
    ]
