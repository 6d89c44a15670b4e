"""How often the Discord channel calls into the gateway for one inbound message (the Telegram
count and the counting itself: ``tests/test_gateway_calls.py``)."""

from __future__ import annotations

import asyncio

from tests.discord_harness import (
    ALICE,
    CHANNEL,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    posts_to,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_gateway_calls import count_calls


async def test_a_discord_dm_and_a_channel_message_call_the_gateway_once_each(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    calls = count_calls(gateway.app.gateway)
    fake_llm.script(Reply(text="Hello!"), Reply(text="Hi all!"))
    await fake.dm_message(user_id=ALICE, content="hi there")
    await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    assert sum(calls.values()) == 1, calls
    await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="Mira, hello")
    await fake.wait_until(lambda: len(fake_llm.requests) == 2, TIMEOUT, "the second turn")
    await asyncio.wait_for(gateway.app.dispatcher.idle(), TIMEOUT)  # its reply is sent
    assert sum(calls.values()) == 2, calls
