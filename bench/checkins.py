"""What proactive check-ins cost: 1,000 opted-in users over a simulated month.

The check-in pass runs every 30 simulated minutes, as the scheduler does; users write now and
then (some daily, some weekly, some never) and answer half of the check-ins. Against it, in the
same run, the naive design: ask the model about every user every 30 minutes. The naive side is
sampled (its calls are all alike) and scaled to the month. Goal: under 1% of its tokens.

    .venv/bin/python bench/checkins.py
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.channels import CountingChannel  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from bot.store import NewMessage  # noqa: E402
from partners.checkins import KIND_CHECKIN  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402

USERS = 1000
DAYS = 30
PASS_MINUTES = 30
NAIVE_SAMPLE = 50
PRESET = """name: Mira
proactive:
  enabled: true
  window: "10:00-20:00"
  quiet_hours: "22:00-08:00"
  max_per_day: 1
  max_per_week: 2
  idle_hours: 24
"""


async def main() -> None:
    rng = random.Random(11)
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM(lambda _r: Reply(text="Thinking of you — how did the week go?")) as llm:
            config = Config.model_validate(
                {
                    "llm": {
                        "base_url": llm.base_url,
                        "api_key": "x",
                        "model": "m",
                        "max_retries": 0,
                    },
                    "storage": {"data_dir": str(Path(tmp) / "data")},
                    "owner": {"timezone": "UTC"},
                    "memory": {"auto_memory": False},
                }
            )
            channel = CountingChannel()
            app = await build_app(config, {"bench": channel})
            partner = app.catalog.require("example")
            (partner.dir / "preset.yml").write_text(PRESET)
            app.catalog.reload()
            partner = app.catalog.require("example")
            start = datetime(2026, 3, 1, tzinfo=UTC).timestamp()
            every = [rng.choice([1, 1, 2, 3, 7, 14, 10_000]) for _ in range(USERS)]
            for user in range(USERS):
                key = f"bench:{user}"
                await app.store.upsert_user(key, "bench", str(user), f"user {user}", None)
                await app.store.set_checkins("example", key, True)
                await app.store.set_user_timezone(
                    key, rng.choice(["UTC", "Europe/Lisbon", "America/New_York"])
                )
            now = start
            passes = 0
            while now < start + DAYS * 86400:
                app.checkins.clock = lambda now=now: now
                await app.checkins.run()
                passes += 1
                now += PASS_MINUTES * 60
                if passes % 48 == 0:  # once a simulated day, some users write
                    day = int((now - start) // 86400)
                    await app.store.add_messages(
                        [
                            NewMessage(
                                f"bench:{u}",
                                "user",
                                "hi, busy day",
                                f"user:bench:{u}",
                                partner_id="example",
                                user_key=f"bench:{u}",
                                created_at=now + rng.uniform(0, 3600),
                            )
                            for u in range(USERS)
                            if day % every[u] == 0 or rng.random() < 0.03
                        ]
                    )
            usage = await app.store.usage("2000-01-01")
            ours = [r for r in usage if r["kind"] == KIND_CHECKIN]
            calls = sum(r["calls"] for r in ours)
            tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in ours)
            # the naive design: one model call per user per pass, context like a chat turn
            sample_before = len(llm.requests)
            for user in range(NAIVE_SAMPLE):
                app.checkins.clock = lambda: start
                await app.checkins._compose(partner, f"bench:{user}", None)
            sampled = await app.store.usage("2000-01-01")
            naive_tokens_sample = (
                sum(
                    r["prompt_tokens"] + r["completion_tokens"]
                    for r in sampled
                    if r["kind"] == KIND_CHECKIN
                )
                - tokens
            )
            assert len(llm.requests) - sample_before == NAIVE_SAMPLE
            naive_calls = USERS * passes
            naive_tokens = naive_tokens_sample / NAIVE_SAMPLE * naive_calls
            await app.stop()
    print(
        f"{USERS} opted-in users, {DAYS} simulated days, a pass every {PASS_MINUTES} min "
        f"({passes} passes)"
    )
    print(f"gated check-ins: {calls} model calls, {tokens} tokens, {channel.sent} messages sent")
    print(f"naive heartbeat: {naive_calls} model calls, ~{naive_tokens:.0f} tokens")
    print(f"share: {tokens / naive_tokens * 100:.3f}% of the naive tokens (goal < 1%)")


if __name__ == "__main__":
    asyncio.run(main())
