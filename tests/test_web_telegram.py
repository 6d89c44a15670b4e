"""``/admin web`` end to end on Telegram: the real python-telegram-bot against the fake Bot
API. The owner's direct message gets the one-time link and opening it logs in (an aiohttp
client on 127.0.0.1); anyone else's ``/admin web`` gets the unknown-command answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.commands.table import UNKNOWN
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import BOT_USERNAME, OWNER, TelegramGateways
from tests.web_support import LINK, base_of, browser_client, log_in

STRANGER = 6060
WEB_ON = {"enabled": True, "port": 0}


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(bot_username=BOT_USERNAME) as fake:
        yield fake


@pytest.fixture
async def gateways(
    telegram: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[TelegramGateways]:
    gateways = TelegramGateways(telegram, fake_llm, tmp_path / "data")
    yield gateways
    await gateways.stop_all()


async def test_the_owners_dm_gets_a_link_that_logs_in(
    gateways: TelegramGateways, telegram: FakeTelegram
) -> None:
    await gateways.start(web=WEB_ON)
    telegram.send_user_message(chat_id=OWNER, text="/admin web", first_name="Owner")
    [answer] = await telegram.wait_for_sent(chat_id=OWNER, timeout=10)
    shown = answer.result["text"]  # what the owner reads in Telegram
    found = LINK.search(shown)
    assert found, shown
    link = found.group(1)
    assert link.startswith("http://127.0.0.1:") and "works once" in shown
    async with browser_client() as browser:
        page = await log_in(browser, link)
        assert "Status" in page and "telegram connected" in page
        async with browser.post(link) as again:
            assert again.status == 403  # spent
    async with browser_client() as stranger, stranger.get(base_of(link) + "/") as response:
        assert response.status == 403


async def test_a_strangers_admin_web_is_an_unknown_command(
    gateways: TelegramGateways, telegram: FakeTelegram
) -> None:
    gateway = await gateways.start(web=WEB_ON, access={"dm_policy": "open"})
    telegram.send_user_message(chat_id=STRANGER, text="/admin web", first_name="Mallory")
    telegram.send_user_message(chat_id=STRANGER, text="/frobnicate", first_name="Mallory")
    answers = await telegram.wait_for_sent(chat_id=STRANGER, count=2, timeout=10)
    assert [a.result["text"] for a in answers] == [UNKNOWN, UNKNOWN]
    assert not any("/login/" in (call.text or "") for call in telegram.sent())
    assert await gateway.app.store.audit_rows("web login") == []
