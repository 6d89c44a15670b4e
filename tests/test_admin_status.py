"""The running gateway from the owner's DM: status, usage and cost, settings, backups."""

from __future__ import annotations

import io
import socket
import tarfile
from datetime import datetime
from typing import Any

from tests.admin_support import admin, say
from tests.conftest import OWNER_ID, Harness, dm


async def restart(harness: Harness, harness_factory: Any, **sections: Any) -> Harness:
    await harness.app.stop()
    return await harness_factory(**sections)


async def test_status_reports_uptime_channels_queue_turns_reviews_and_jobs(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(memory={"auto_memory": True, "review_turns": 50})
    await say(harness, 42, "hello", "hi")
    await harness.app.store.review_succeeded(
        (await harness.app.store.open_session("test:42", "example")).id,  # type: ignore[union-attr]
        0,
    )
    status = await admin(harness, "/admin status")
    assert status.startswith("Up 0 min")
    assert "Channels: test connected" in status
    assert "Queue: 0 message(s) waiting" in status
    assert "Last hour: 1 turns, 0 errors" in status
    assert "Mira: 0 min ago" in status
    assert "review-sweep: 20" in status and "nightly: 20" in status
    assert "Budgets today: none set" in status


async def test_status_without_automatic_memory_lists_no_review_jobs(harness: Harness) -> None:
    status = await admin(harness, "/admin status")
    assert "review-sweep" not in status and "nightly" not in status
    assert "Mira: never" in status


async def test_usage_shows_tokens_per_partner_day_and_kind_with_cost(harness_factory: Any) -> None:
    harness = await harness_factory(
        llm={"price_prompt_per_million": 2.0, "price_completion_per_million": 8.0}
    )
    today = datetime.now(harness.config.owner_timezone()).date().isoformat()
    store = harness.app.store
    await store.add_usage(today, "example", "chat", "m", 1000, 100)
    await store.add_usage(today, "example", "review", "m", 500, 50)
    await store.add_usage(today, "example", "consult", "m", 300, 30)
    await store.add_usage(today, "example", "checkin", "m", 200, 20)
    await store.add_usage("2000-01-01", "example", "chat", "m", 9, 9)
    usage = await admin(harness, "/admin usage 7")
    assert "example: 2000 + 200 ≈ 0.0056" in usage
    for kind, prompt, completion in (
        ("chat", 1000, 100),
        ("review", 500, 50),
        ("consult", 300, 30),
        ("checkin", 200, 20),
    ):
        assert f"{today} example {kind}: {prompt} + {completion}" in usage
    assert "2000-01-01" not in usage
    assert "from 1 to 366" in await admin(harness, "/admin usage many")


async def test_usage_without_prices_says_the_cost_is_unknown(harness: Harness) -> None:
    await say(harness, 42, "hello", "hi")
    usage = await admin(harness, "/admin usage")
    assert "cost unknown" in usage and "≈" not in usage
    assert "example chat:" in usage


async def test_settings_show_validate_and_survive_a_restart(harness_factory: Any) -> None:
    harness = await harness_factory()
    shown = await admin(harness, "/admin settings")
    assert "review_turns = 3 (default)" in shown and "auto_memory = false (config.toml)" in shown
    assert await admin(harness, "/admin settings review_turns 5") == (
        "review_turns = 5 (applies: next trigger)."
    )
    assert harness.app.reviewer.settings().review_turns == 5
    refused = await admin(harness, "/admin settings history_chars 10")
    assert "history_chars = '10' refused" in refused
    assert "not a setting here" in await admin(harness, "/admin settings nightly 05:00")
    assert "true or false" in await admin(harness, "/admin settings budget_notice maybe")
    harness = await restart(harness, harness_factory)
    assert harness.app.reviewer.settings().review_turns == 5
    assert harness.app.reviewer.settings().history_chars == 12000
    assert "review_turns = 5 (set here)" in await admin(harness, "/admin settings")
    await admin(harness, "/admin settings review_turns default")
    assert harness.app.reviewer.settings().review_turns == 3


async def test_a_bad_threshold_falls_back_to_its_default(harness: Harness) -> None:
    await admin(harness, "/admin settings review_chars 5000")
    answer = await admin(harness, "/admin settings review_chars 0")
    assert answer == "review_chars = '0' is not a positive number; using the default 2000."
    assert harness.app.reviewer.settings().review_chars == 2000
    assert "using the default 3" in await admin(harness, "/admin settings review_turns lots")


async def test_prompt_budget_applies_from_the_next_session(harness: Harness) -> None:
    await say(harness, 42, "hello", "hi")
    first = harness.llm.requests[-1]["messages"][0]["content"]
    await admin(harness, "/admin settings context_budget 100")
    await say(harness, 42, "still me", "yes")
    assert harness.llm.requests[-1]["messages"][0]["content"] == first
    await harness.send(dm(42, "/new"))
    await say(harness, 42, "fresh start", "hello again")
    prompt = harness.llm.requests[-1]["messages"][0]["content"]
    assert "over the budget of 100" in prompt and "over the budget" not in first


async def test_backup_sends_an_archive_of_the_data(harness: Harness) -> None:
    await say(harness, 42, "hello", "hi")
    answer = await admin(harness, "/admin backup")
    assert answer.startswith("Backup of the data directory, also kept at")
    chat, filename, data, _ = harness.channel.files[-1]
    assert chat.chat_id == str(OWNER_ID) and filename.endswith(".tar.gz")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        names = set(archive.getnames())
    assert {"data/gateway.db", "data/partners/example/SOUL.md"} <= names
    assert not any(name.startswith("data/backups") for name in names)
    assert (harness.config.data_dir / "backups" / filename).exists()


async def test_status_lists_the_workers_the_leader_with_its_epoch_and_their_leases(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(workers={"id": "worker_1"})
    status = await admin(harness, "/admin status")
    assert "Workers: 1 (leader worker\\_1, epoch 1)" in status
    assert f"worker\\_1 on {socket.gethostname()}: heartbeat 0 s ago, 0 chat(s) leased" in status
