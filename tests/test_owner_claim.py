"""Claiming ownership: with no owner for a platform, the first person to send the one-time
claim code in a direct message (``/claim CODE``, or ``/start CODE`` from the Telegram deep
link) becomes the owner — at once, across restarts, once. Real python-telegram-bot against the
fake Bot API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.discord_harness import TIMEOUT, DiscordGateways, posts_to
from tests.fakes.fake_discord import FakeDiscord, point_discord_at
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    BOT_USERNAME,
    GROUP,
    Gateway,
    TelegramGateways,
    settled,
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

ALICE = 501
BOB = 502
NO_OWNER = {"telegram_ids": []}
DISCORD_ALICE = 5


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(bot_username=BOT_USERNAME) as tg:
        yield tg


async def start_unowned(gateways: TelegramGateways) -> Gateway:
    return await gateways.start(owner=NO_OWNER, access={"dm_policy": "pairing"})


def owns(gateway: Gateway, user_id: int) -> bool:
    return gateway.app.gateway.access.is_owner(f"telegram:{user_id}")


async def answer(fake: FakeTelegram, chat_id: int, text: str) -> str:
    before = len(fake.sent("sendMessage", chat_id))
    fake.send_user_message(chat_id=chat_id, text=text, first_name=f"U{chat_id}")
    sent = await fake.wait_for_sent(chat_id=chat_id, count=before + 1)
    return sent[before].text or ""


async def test_the_right_code_makes_the_sender_the_owner_at_once(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    assert "You're the owner" in await answer(fake, ALICE, f"/claim {code}")
    assert owns(gateway, ALICE)
    cards = await answer(fake, ALICE, "/admin partners")
    assert "Mira (example)" in cards
    [row] = await gateway.app.store.audit_rows("owner claim")
    assert row["actor"] == f"telegram:{ALICE}" and row["detail"]["outcome"] == "claimed"
    assert code not in str(row["detail"])
    assert fake_llm.requests == []


async def test_the_telegram_deep_link_start_claims_too(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    assert "You're the owner" in await answer(fake, ALICE, f"/start {code.lower()}")
    assert owns(gateway, ALICE)


async def test_a_code_works_once(gateways: TelegramGateways, fake: FakeTelegram) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    spare = await gateway.app.gateway.claims.issue("telegram")
    await answer(fake, ALICE, f"/claim {code}")
    for attempt in (code, spare):
        reply = await answer(fake, BOB, f"/claim {attempt}")
        assert "You're the owner" not in reply and "private" in reply
    assert not owns(gateway, BOB)
    assert [r["user_key"] for r in await gateway.app.store.claimed_owners()] == [
        f"telegram:{ALICE}"
    ]


async def test_a_wrong_code_is_refused_without_telling_the_right_one(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    wrong = code[:-1] + ("2" if code[-1] != "2" else "3")
    reply = await answer(fake, BOB, f"/claim {wrong}")
    assert "not valid" in reply and code not in reply and "companion" in reply
    assert not owns(gateway, BOB)
    assert "You're the owner" in await answer(fake, ALICE, f"/claim {code}")
    refused = await gateway.app.store.audit_rows("owner claim")
    assert [r["detail"]["outcome"] for r in refused] == ["claimed", "refused"]


async def test_an_expired_code_is_refused(gateways: TelegramGateways, fake: FakeTelegram) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram", ttl_seconds=-1)
    assert "not valid" in await answer(fake, ALICE, f"/claim {code}")
    assert not owns(gateway, ALICE)


async def test_a_claim_outside_a_direct_message_is_ignored(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    fake.send_user_message(
        chat_id=GROUP, user_id=ALICE, chat_type="supergroup", text=f"/claim {code}"
    )
    fake.send_user_message(
        chat_id=GROUP, user_id=ALICE, chat_type="supergroup", text=f"/claim@{BOT_USERNAME} {code}"
    )
    await settled(fake, gateway)
    assert fake.sent("sendMessage", GROUP) == []
    assert not owns(gateway, ALICE)
    assert "You're the owner" in await answer(fake, ALICE, f"/claim {code}")


async def test_a_claimed_owner_stays_the_owner_after_a_restart(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    await answer(fake, ALICE, f"/claim {code}")
    await gateways.stop_all()
    restarted = await start_unowned(gateways)
    assert owns(restarted, ALICE)
    assert "Mira (example)" in await answer(fake, ALICE, "/admin partners")


def menu_of(fake: FakeTelegram, chat_id: int) -> list[str]:
    """The commands Telegram shows in one chat's menu (set with a chat scope)."""
    scope = json.dumps({"chat_id": chat_id, "type": "chat"}, sort_keys=True)
    return [command["command"] for command in fake.commands.get((scope, ""), [])]


async def test_a_claimed_owner_gets_admin_in_the_command_menu_at_once(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await start_unowned(gateways)
    assert menu_of(fake, ALICE) == []
    code = await gateway.app.gateway.claims.issue("telegram")
    await answer(fake, ALICE, f"/claim {code}")
    await fake.wait_until(lambda: "admin" in menu_of(fake, ALICE), description="/admin menu")
    assert menu_of(fake, ALICE)[:2] == ["start", "help"]


async def test_a_claimed_owner_gets_admin_in_the_command_menu_after_a_restart(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await start_unowned(gateways)
    code = await gateway.app.gateway.claims.issue("telegram")
    await answer(fake, ALICE, f"/claim {code}")
    await gateways.stop_all()
    fake.commands.clear()
    await start_unowned(gateways)
    assert "admin" in menu_of(fake, ALICE)


async def test_with_an_owner_in_the_config_a_claim_is_an_ordinary_message(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start(access={"dm_policy": "pairing"})
    code = await gateway.app.gateway.claims.issue("telegram")
    reply = await answer(fake, ALICE, f"/claim {code}")
    assert "private" in reply and not owns(gateway, ALICE)


async def test_a_discord_dm_claims_discord(tmp_path: Path, fake_llm: FakeLLM) -> None:
    async with FakeDiscord() as server:
        server.add_user(DISCORD_ALICE, "alice")
        restore = point_discord_at(server)
        gateways = DiscordGateways(server, fake_llm, tmp_path / "data")
        try:
            gateway = await gateways.start(bind=(), owner={"discord_ids": []})
            code = await gateway.app.gateway.claims.issue("discord")
            await server.dm_message(user_id=DISCORD_ALICE, content=f"/claim {code}")
            dm = server.dm_channel_id(DISCORD_ALICE)
            reply = await server.wait_for_rest(posts_to(dm), TIMEOUT)
            assert "You're the owner of this companion on Discord" in reply.json["content"]
            assert gateway.app.gateway.access.is_owner(f"discord:{DISCORD_ALICE}")
        finally:
            await gateways.stop_all()
            restore()
