"""A running gateway on the real python-telegram-bot, against FakeTelegram and FakeLLM.

Tests build one with :meth:`TelegramGateways.start` (a second start on the same data
directory is a restart) and read what the bot sent from the fake's recorded calls. A test
module gets the usual fake Bot API and its gateways as the fixtures ``fake`` and ``gateways``
by importing :func:`telegram_fake` and :func:`telegram_gateways`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters.telegram_channel import TelegramChannel
from bot.app import App, build_app
from bot.config.model import Config
from partners.catalog import PartnerCatalog
from tests.card_fixtures import publish
from tests.conftest import make_config
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.fake_telegram import TOKEN, Call, FakeTelegram

OWNER = 4242
GROUP = -100555
BOT_USERNAME = "companion_bot"


@dataclass
class Gateway:
    app: App
    channel: TelegramChannel
    config: Config

    async def crash(self) -> None:
        """Stop as a crash would leave things: running turns are cut off, not finished."""
        await self.channel.stop()
        await self.app.dispatcher.close(0)
        await self.app.delivery.stop(0)
        await self.app.llm.close()
        await self.app.store.close()
        self.app.lock.release()


@dataclass
class TelegramGateways:
    fake: FakeTelegram
    llm: FakeLLM
    data_dir: Path
    running: list[Gateway] = field(default_factory=list)

    def config(self, **sections: dict[str, Any]) -> Config:
        telegram = {
            "token": TOKEN,
            "base_url": self.fake.base_url,
            "poll_timeout_seconds": 1,
            "watchdog_seconds": 5,
            **sections.pop("telegram", {}),
        }
        owner = {"telegram_ids": [OWNER], **sections.pop("owner", {})}
        return make_config(
            self.data_dir, self.llm.base_url, telegram=telegram, owner=owner, **sections
        )

    def add_partner(self, partner_id: str, name: str) -> None:
        """A second partner next to the example (Mira), before the gateway starts."""
        catalog = PartnerCatalog(self.data_dir / "partners")
        catalog.ensure_example()
        publish(catalog.create(partner_id, name).dir)  # a new partner is private until published

    async def start(self, **sections: dict[str, Any]) -> Gateway:
        config = self.config(**sections)
        channel = TelegramChannel(config.telegram, config.owner.telegram_ids)
        app = await build_app(config, {"telegram": channel})
        gateway = Gateway(app, channel, config)
        self.running.append(gateway)
        await app.start()
        return gateway

    async def stop_all(self) -> None:
        for gateway in self.running:
            await gateway.app.stop()
        self.running.clear()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def texts(calls: list[Call]) -> list[str]:
    return [call.text or "" for call in calls]


def replying_to(message_id: int) -> Callable[[Call], bool]:
    def matches(call: Call) -> bool:
        reply = call.params.get("reply_parameters")
        return isinstance(reply, dict) and reply.get("message_id") == message_id

    return matches


async def settled(fake: FakeTelegram, gateway: Gateway, chat_id: int = 31337) -> None:
    """Wait until the gateway has worked through everything sent so far, then until every
    turn it started has ended. A marker (a command: it never reaches the model) is pushed
    last, in a chat of its own; its answer alone does not say that the updates before it
    were handled, since the chats of one batch are handled side by side. Its confirmation
    does: the gateway confirms a batch only once every update in it was handled."""
    before = len(fake.sent("sendMessage", chat_id))
    marker = fake.send_user_message(chat_id=chat_id, text="/help", first_name="Marker")
    await fake.wait_for_sent(chat_id=chat_id, count=before + 1, timeout=10)
    marker_id = int(marker["update_id"])
    await fake.wait_until(
        lambda: all(int(update["update_id"]) > marker_id for update in fake.pending_updates),
        timeout=10,
        description="the updates up to the marker to be confirmed",
    )
    await asyncio.wait_for(gateway.app.dispatcher.idle(), timeout=30)


@pytest.fixture(name="fake")
async def telegram_fake() -> AsyncIterator[FakeTelegram]:
    """The fake Bot API as @companion_bot, which reads every group message (no privacy mode)."""
    async with FakeTelegram(bot_username=BOT_USERNAME, can_read_all_group_messages=True) as tg:
        yield tg


@pytest.fixture(name="gateways")
async def telegram_gateways(
    fake: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[TelegramGateways]:
    """Gateways on ``fake``, with their data in the test's temporary directory; stopped after."""
    gateways = TelegramGateways(fake, fake_llm, tmp_path / "data")
    yield gateways
    await gateways.stop_all()
