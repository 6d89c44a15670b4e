"""A character card dropped into the owner's Telegram DM, through the real python-telegram-bot
against the fake Bot API: summary, confirm, and the character greets in its own picture."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from partners.cards import plan_import, write_import
from partners.catalog import PartnerCatalog
from tests import card_fixtures as cards
from tests import character_files
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    BOT_USERNAME,
    GROUP,
    OWNER,
    TelegramGateways,
    settled,
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

ALICE = 502


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(bot_username=BOT_USERNAME) as tg:
        yield tg


def send_card(
    fake: FakeTelegram,
    raw: bytes,
    name: str = "sirin.png",
    chat_id: int = OWNER,
    caption: str = "/admin partner import",
    **where: Any,
) -> None:
    fake.send_user_message(
        chat_id=chat_id,
        caption=caption,
        document=True,
        media=raw,
        document_name=name,
        document_mime="image/png",
        **where,
    )


async def test_owner_imports_a_card_from_the_dm_after_confirming(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    send_card(fake, cards.png(cards.v3(), keyword="ccv3"))
    [summary] = await fake.wait_for_sent(chat_id=OWNER)
    text = summary.text or ""
    assert "Ŝirin 🌙" in text and "lorebook entries: 2" in text
    partners = gateway.app.config.data_dir / "partners"
    assert not (partners / "sirin").exists()  # nothing before the owner confirms
    [[button]] = summary.params["reply_markup"]["inline_keyboard"]
    fake.push_update(
        fake.callback_query_update(
            chat_id=OWNER,
            user_id=OWNER,
            data=button["callback_data"],
            message_id=summary.result["message_id"],
        )
    )
    await fake.wait_for_sent(lambda c: "Created" in (c.text or ""), chat_id=OWNER)
    assert (partners / "sirin" / "lorebook.json").exists()
    assert gateway.app.catalog.require("sirin").name == "Ŝirin 🌙"
    assert len(fake.file_downloads()) == 1  # fetched once, by the command; the confirm has none


async def test_a_strangers_card_with_the_import_caption_is_never_downloaded(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    """A file costs a download only once the gateway knows its sender may use it: whatever
    a stranger's caption says, nothing is fetched from Telegram."""
    await gateways.start(access={"dm_policy": "pairing"})
    send_card(fake, cards.png(cards.v2()), chat_id=ALICE)
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert "your code is" in (answer.text or "")
    assert fake.file_downloads() == [] and fake.file_fetches == []


async def test_a_group_members_card_with_the_import_caption_is_never_downloaded(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    caption = f"/admin@{BOT_USERNAME} partner import"
    command = {"type": "bot_command", "offset": 0, "length": len(caption.split()[0])}
    send_card(
        fake, cards.png(cards.v2()), chat_id=GROUP, caption=caption,
        chat_type="supergroup", user_id=ALICE, entities=[command],
    )  # fmt: skip
    await settled(fake, gateway)
    assert fake.file_downloads() == [] and fake.file_fetches == []


async def test_a_bad_card_in_the_dm_gets_one_line_and_nothing_is_written(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    send_card(fake, cards.png(cards.v2(), compressed=True))
    [answer] = await fake.wait_for_sent(chat_id=OWNER)
    assert "zTXt" in (answer.text or "") and "\n" not in (answer.text or "").strip()
    partners = gateway.app.config.data_dir / "partners"
    assert sorted(p.name for p in partners.iterdir()) == ["example"]


async def test_picking_a_card_partner_shows_its_picture_then_its_greeting(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    root = gateways.data_dir / "partners"
    PartnerCatalog(root).ensure_example()
    write_import(plan_import(cards.png(cards.v2()), "sirin.png", "sirin", root), root)
    cards.publish(root / "sirin")  # Alice is not the owner
    await gateways.start()
    fake.send_user_message(chat_id=ALICE, text="/partner sirin")
    [photo] = await fake.wait_for_sent(chat_id=ALICE, method="sendPhoto")
    assert photo.params["caption"].startswith("You're now talking with Ŝirin 🌙")
    assert photo.files["photo"][1] == (root / "sirin" / "avatar.png").read_bytes()
    [greeting] = await fake.wait_for_sent(chat_id=ALICE)
    assert (greeting.text or "").endswith("I'm Ŝirin 🌙.")


async def test_owner_imports_a_risu_jpeg_card_from_the_dm(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    """RisuAI's JPEG card sent as a document: the zip after the picture is read, its main icon
    becomes the avatar and its other assets are kept."""
    gateway = await gateways.start()
    send_card(fake, character_files.jpeg_charx(), name="tamsin.jpeg")
    [summary] = await fake.wait_for_sent(chat_id=OWNER)
    assert "card: V3 CHARX in a JPEG" in (summary.text or "")
    [[button]] = summary.params["reply_markup"]["inline_keyboard"]
    fake.push_update(
        fake.callback_query_update(
            chat_id=OWNER,
            user_id=OWNER,
            data=button["callback_data"],
            message_id=summary.result["message_id"],
        )
    )
    await fake.wait_for_sent(lambda c: "Created" in (c.text or ""), chat_id=OWNER)
    partner = gateway.app.catalog.require("tamsin-reed")
    assert partner.avatar_image is not None and partner.avatar_image.startswith(b"\x89PNG")
    assert (partner.dir / "assets" / "emotion" / "image" / "joy.webp").exists()
