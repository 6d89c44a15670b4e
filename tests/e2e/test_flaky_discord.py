"""Discord through the real process while a fifth of its sends fail with 429 or 500: discord.py
and the gateway retry, and every reply still arrives once."""

from __future__ import annotations

import random
import re
from collections.abc import AsyncIterator

import pytest

from tests.e2e.conftest import World, assert_no_secrets
from tests.fakes.fake_discord import FakeDiscord, RestCall

DISCORD_TOKEN = "E2E-SECRET-discord-token"
GUILD, CHANNEL = 10, 20
BOT_ID = 900
USERS = (5, 6, 7, 8)
ROUNDS = 3
FAIL_SHARE = 0.2
TIMEOUT_SECONDS = 60.0


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=DISCORD_TOKEN, bot_id=BOT_ID) as server:
        server.add_guild(GUILD, "Tea House")
        server.add_text_channel(GUILD, CHANNEL, "general")
        for user in USERS:
            server.add_user(user, f"user{user}")
        yield server


def reply_sends(discord: FakeDiscord) -> list[RestCall]:
    """Successful message posts: DM replies and the partner's webhook posts in the channel."""
    return [
        c
        for c in discord.rest_calls
        if c.ok and c.method == "POST" and re.match(r"^/(channels/\d+/messages|webhooks/)", c.path)
    ]


def naming(discord: FakeDiscord, tag: str) -> list[str]:
    pattern = re.compile(rf"#{tag}\b")
    texts = [str((c.json or {}).get("content", "")) for c in reply_sends(discord)]
    return [text for text in texts if pattern.search(text)]


async def test_every_reply_arrives_once_while_discord_fails_a_fifth_of_its_sends(
    world: World, discord: FakeDiscord
) -> None:
    rng = random.Random(7)
    config = world.config(
        telegram=None,
        discord={"token": DISCORD_TOKEN, "api_base": discord.api_base,
                 "gateway_url": discord.gateway_url},
        owner={"discord_ids": [1]},
        bindings=[{"platform": "discord", "chat_id": str(CHANNEL), "partner": "example"}],
    )  # fmt: skip
    gateway = await world.start(config)
    tags: list[str] = []
    for _ in range(ROUNDS):
        for user in USERS:
            tag = world.tag()
            tags.append(tag)
            if rng.random() < FAIL_SHARE * 2:  # one post in five on average fails once
                status = rng.choice([429, 500])
                prefix = "/channels/" if user % 2 else "/webhooks/"
                discord.fail_next("POST", prefix, status=status, retry_after=0.05)
            if user % 2:
                await discord.dm_message(user_id=user, content=f"hi there #{tag}")
            else:
                await discord.message_create(channel_id=CHANNEL, author_id=user,
                                             content=f"<@{BOT_ID}> hi #{tag}",
                                             mentions=[BOT_ID])  # fmt: skip
            await discord.wait_until(lambda tag=tag: naming(discord, tag), TIMEOUT_SECONDS,
                                     f"the reply naming #{tag}")  # fmt: skip

    failed = [c for c in discord.rest_calls if c.method == "POST" and c.status in (429, 500)]
    assert failed, "no send failed: the faults were not exercised"
    for tag in tags:
        assert len(naming(discord, tag)) == 1, f"#{tag}"
    assert gateway.errors() == []
    assert_no_secrets(gateway.output)
    assert DISCORD_TOKEN not in gateway.output


async def test_sigterm_with_discord_turns_in_flight_loses_no_reply(
    world: World, discord: FakeDiscord
) -> None:
    world.model.answer_delay_seconds = 0.5
    config = world.config(
        telegram=None,
        discord={"token": DISCORD_TOKEN, "api_base": discord.api_base,
                 "gateway_url": discord.gateway_url},
        owner={"discord_ids": [1]},
    )  # fmt: skip
    gateway = await world.start(config)
    tags = []
    for user in USERS:
        tag = world.tag()
        tags.append(tag)
        await discord.dm_message(user_id=user, content=f"still up? #{tag}")
    await world.llm.wait_for_requests(len(USERS), timeout=TIMEOUT_SECONDS)
    assert await gateway.terminate() == 0
    # the turns in flight finished, and their replies went out, before the process ended
    assert all(len(naming(discord, tag)) == 1 for tag in tags)
    assert gateway.errors() == []
    restarted = await world.start(config)
    assert "0 replies re-delivered" in restarted.output or "recovered" not in restarted.output
    assert all(len(naming(discord, tag)) == 1 for tag in tags)
