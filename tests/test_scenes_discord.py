"""Scenes on Discord, end to end on the real discord.py against the fake Discord: each partner
answers under its own webhook face, in cast order, hears the other, and hands it the turn by
name; the persona messages that come back over the gateway are never taken for people's."""

from __future__ import annotations

import json
from typing import Any

from tests.discord_harness import (
    ALICE,
    CHANNEL,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM, Reply


def speaker_of(request: dict[str, Any]) -> str:
    system = str(request["messages"][0]["content"])
    return "Sol" if "You are Sol." in system else "Mira"


async def test_both_of_you_is_answered_by_each_partner_under_its_own_webhook_in_order(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start(bind=[(CHANNEL, "example"), (CHANNEL, "sol")])
    fake_llm.script(Reply(text="Green tea."), Reply(text="Black tea, strong."))
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content="Which tea would both of you pick?"
    )
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 2, TIMEOUT, "both replies")
    await gateway.app.dispatcher.idle()
    mira, sol = fake.webhook_messages()
    assert (mira.json["username"], mira.json["content"]) == ("Mira", "Green tea.")
    assert (sol.json["username"], sol.json["content"]) == ("Sol", "Black tea, strong.")
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira", "Sol"]
    assert "· Mira] Green tea." in json.dumps(fake_llm.requests[1]["messages"], ensure_ascii=False)


async def test_a_partner_hands_the_turn_to_another_by_name_and_the_chain_ends(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start(bind=[(CHANNEL, "example"), (CHANNEL, "sol")])
    fake_llm.responder = lambda request: Reply(
        text="Your turn, Mira." if speaker_of(request) == "Sol" else "Your turn, Sol."
    )
    await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="Sol, start a game")
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 3, TIMEOUT, "the chain")
    await gateway.app.dispatcher.idle()
    # Sol answers, hands to Mira, who hands back once; a second Sol-to-Mira would be a loop
    assert [m.json["username"] for m in fake.webhook_messages()] == ["Sol", "Mira", "Sol"]
    assert len(fake_llm.requests) == 3
