"""A running gateway on the real discord.py, against FakeDiscord and FakeLLM.

Tests build one with :meth:`DiscordGateways.start` (a second start on the same data directory
is a restart) and read what the bot sent from the fake's recorded REST calls. A test module
gets the usual server and its gateways as the fixtures ``fake`` and ``gateways`` by importing
:func:`tea_house` and :func:`discord_gateways`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.discord_channel import DiscordChannel
from bot.app import App, build_app
from bot.config.model import Config
from bot.workers.shards import shards_leased
from partners.catalog import PartnerCatalog
from tests.card_fixtures import publish
from tests.conftest import make_config
from tests.fakes.fake_discord import (
    BOT_TOKEN,
    DISCORD_EPOCH_MS,
    FakeDiscord,
    RestCall,
    point_discord_at,
)
from tests.fakes.fake_llm import FakeLLM

GUILD = 10
CHANNEL = 20
THREAD = 30
OWNER = 1  # FakeDiscord's default owner_id
ALICE = 5
BOB = 6
BOT_ID = 900  # FakeDiscord's default bot id
TIMEOUT = 5.0


@dataclass
class DiscordGateway:
    app: App
    channel: DiscordChannel
    config: Config


@dataclass
class DiscordGateways:
    fake: FakeDiscord
    llm: FakeLLM
    data_dir: Path
    running: list[DiscordGateway] = field(default_factory=list)

    def config(self, **sections: dict[str, Any]) -> Config:
        discord = {
            "token": BOT_TOKEN,
            "api_base": self.fake.api_base,
            "gateway_url": self.fake.gateway_url,
            **sections.pop("discord", {}),
        }
        owner = {"discord_ids": [OWNER], **sections.pop("owner", {})}
        return make_config(
            self.data_dir, self.llm.base_url, discord=discord, owner=owner, **sections
        )

    def add_partner(self, partner_id: str, name: str, avatar: str | None = None) -> None:
        """A second partner next to the example (Mira), before the gateway starts."""
        catalog = PartnerCatalog(self.data_dir / "partners")
        catalog.ensure_example()
        partner = catalog.create(partner_id, name)
        publish(partner.dir)  # a new partner is private until published
        if avatar:
            with (partner.dir / "preset.yml").open("a", encoding="utf-8") as preset:
                preset.write(f"avatar: {avatar}\n")

    async def start(
        self, bind: Iterable[tuple[int, str]] = ((CHANNEL, "example"),), **sections: Any
    ) -> DiscordGateway:
        """Build, bind ``(channel id, partner id)`` pairs, then start (connect) the gateway."""
        config = self.config(**sections)
        channel = DiscordChannel(
            config.discord,
            guild_ready_timeout=0.05,
            shards_assigned=shards_leased(config),
            identify_interval=0.0,  # Discord's pacing of IDENTIFYs would slow the tests
        )
        app = await build_app(config, {"discord": channel})
        for channel_id, partner_id in bind:
            await app.store.bind("discord", str(channel_id), partner_id, "command")
        gateway = DiscordGateway(app, channel, config)
        self.running.append(gateway)
        await app.start()
        return gateway

    async def stop_all(self) -> None:
        for gateway in self.running:
            await gateway.app.stop()
        self.running.clear()


def snowflake_at(seconds_ago: float, now_ms: int) -> int:
    """A message id whose embedded time is ``seconds_ago`` before ``now_ms``."""
    return (now_ms - int(seconds_ago * 1000) - DISCORD_EPOCH_MS) << 22


def posts_to(channel_id: int) -> Callable[[RestCall], bool]:
    def matches(call: RestCall) -> bool:
        return call.ok and call.method == "POST" and call.path == f"/channels/{channel_id}/messages"

    return matches


async def eventually(predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Poll a condition the fake cannot signal (a file, a counter) until it holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if predicate():
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture(name="fake")
async def tea_house(request: pytest.FixtureRequest) -> AsyncIterator[FakeDiscord]:
    """The server most tests talk in: Tea House (owned by OWNER) with #general and its thread
    "brewing", alice and bob; discord.py points at it until the test ends. A test may pass
    FakeDiscord's options with ``@pytest.mark.parametrize("fake", [{...}], indirect=True)``."""
    options: dict[str, Any] = getattr(request, "param", {})
    async with FakeDiscord(**options) as server:
        server.add_guild(GUILD, "Tea House", owner_id=OWNER)
        server.add_text_channel(GUILD, CHANNEL, "general")
        server.add_thread(GUILD, CHANNEL, THREAD, "brewing")
        server.add_user(ALICE, "alice")
        server.add_user(BOB, "bob")
        restore = point_discord_at(server)
        try:
            yield server
        finally:
            restore()


@pytest.fixture(name="gateways")
async def discord_gateways(
    fake: FakeDiscord, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[DiscordGateways]:
    """Gateways on ``fake``, with their data in the test's temporary directory; stopped after."""
    gateways = DiscordGateways(fake, fake_llm, tmp_path / "data")
    yield gateways
    await gateways.stop_all()
