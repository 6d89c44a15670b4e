"""What automatic memory costs: review tokens against chat tokens for a chatty user's day.

A simulated user sends 200 messages in one day to the example partner through the full gateway
path; reviews trigger as they would (every 3 human turns or 2000 new characters) and run at
once. The fake LLM counts tokens the same way for both kinds of call (request bytes / 4), so
the share is a like-for-like ratio. Goal: review tokens <= 15% of the day's chat tokens.

    .venv/bin/python bench/review.py
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.channels import CountingChannel  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from bot.events import ChatRef, Inbound, Sender  # noqa: E402
from tests.fakes.fake_llm import FakeLLM, Reply  # noqa: E402

TURNS = 200
TOPICS = [
    "work was long today, the new manager keeps changing priorities",
    "I went running by the river, 8 km, my knee felt better",
    "my sister called about the wedding plans for June",
    "I'm thinking about learning Portuguese before the trip",
    "the cat knocked over the plant again, soil everywhere",
    "I cooked that lentil soup you suggested, it was great",
    "couldn't sleep well, too much coffee probably",
    "we're planning a weekend in the mountains with friends",
]


def responder(request: dict[str, Any]) -> Reply:
    if "response_format" in request:
        return Reply(
            text=json.dumps(
                {
                    "journal": {
                        "summary": "Talked about the day and plans",
                        "facts": ["Runs by the river"],
                    },
                    "memory": [
                        {
                            "file": "users/bench-1.md",
                            "op": "add",
                            "text": f"Topic {len(request['messages'][0]['content']) % 97}",
                        }
                    ],
                }
            )
        )
    return Reply(text="That sounds like a lot. " * 6 + "How did it make you feel?")


async def main() -> None:
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeLLM(responder) as llm:
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
                    "access": {"dm_policy": "open"},
                }
            )
            channel = CountingChannel()
            app = await build_app(config, {"bench": channel})
            await app.start()
            shift = [0.0]  # time moves on by the debounce after each turn: due reviews run now
            app.reviewer.clock = lambda: time.time() + shift[0]
            for i in range(TURNS):
                text = rng.choice(TOPICS) + f" ({i})"
                await app.gateway.receive(
                    Inbound(
                        ChatRef("bench", "1", "dm"),
                        Sender("bench", "1", "Sam"),
                        f"m{i}",
                        text,
                        datetime.now(UTC),
                    )
                )
                await app.dispatcher.idle()
                shift[0] += 10
                await app.reviewer.run_due()
            usage = await app.store.usage("2000-01-01")
            await app.stop()
    by_kind: dict[str, dict[str, int]] = {}
    for row in usage:
        kind = by_kind.setdefault(row["kind"], {"calls": 0, "tokens": 0})
        kind["calls"] += row["calls"]
        kind["tokens"] += row["prompt_tokens"] + row["completion_tokens"]
    chat, review = (
        by_kind.get("chat", {"tokens": 0}),
        by_kind.get("review", {"tokens": 0, "calls": 0}),
    )
    share = review["tokens"] / chat["tokens"] * 100 if chat["tokens"] else 0.0
    per_segment = review["tokens"] / review["calls"] if review.get("calls") else 0
    print(
        f"{TURNS} turns: chat {chat['tokens']} tokens, review {review['tokens']} tokens in "
        f"{review.get('calls', 0)} reviews ({per_segment:.0f} per reviewed segment)"
    )
    print(f"review share of the day's chat tokens: {share:.1f}% (goal <= 15%)")


if __name__ == "__main__":
    asyncio.run(main())
