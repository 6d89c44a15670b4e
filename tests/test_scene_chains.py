"""Partner-to-partner chains over many messages: whatever the partners say to each other, a
chain after one human message stays within ``[scene]`` bounds and ends by itself. The gateway
runs on the recording channel (the SDKs are exercised in tests/test_scenes.py); the model is
scripted so that every partner always hands the turn to every other one."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest

from tests.card_fixtures import publish
from tests.conftest import Harness, group_message
from tests.fakes.fake_llm import Reply

NAMES = {"example": "Mira", "sol": "Sol", "kai": "Kai"}


def speaker_of(request: dict[str, Any]) -> str:
    system = str(request["messages"][0]["content"])
    return next(name for name in NAMES.values() if f"You are {name}." in system)


@pytest.mark.parametrize("max_partner_turns", [3, 6])
async def test_five_hundred_partner_replies_never_loop_and_keep_every_bound(
    harness_factory: Callable[..., Any], max_partner_turns: int
) -> None:
    harness: Harness = await harness_factory(scene={"max_partner_turns": max_partner_turns})
    for partner_id in ("sol", "kai"):
        publish(harness.app.catalog.create(partner_id, NAMES[partner_id]).dir)
    harness.app.catalog.reload()  # published: their preset.yml changed
    for partner_id in NAMES:
        await harness.app.store.bind("test", "g1", partner_id, "command")
    pick = random.Random(7)

    def hand_over(request: dict[str, Any]) -> Reply:
        me = speaker_of(request)
        others = [name for name in NAMES.values() if name != me]
        return Reply(text=" and ".join(pick.sample(others, pick.randint(1, 2))) + ", you?")

    harness.llm.responder = hand_over
    seen = 0
    for n in itertools.count():
        first = pick.choice(list(NAMES.values()))
        await harness.send(group_message("g1", 42, f"{first}, round {n}?", addressed=False))
        await harness.settle()
        answers = [speaker_of(r) for r in harness.llm.requests[seen:]]
        seen = len(harness.llm.requests)
        assert answers[0] == first
        assert 1 <= len(answers) <= 1 + max_partner_turns
        assert all(answers.count(name) <= 2 for name in NAMES.values())
        if seen >= 500:
            break
    assert len(harness.channel.sent) == seen
    assert await harness.app.store.pending_count() == 0
