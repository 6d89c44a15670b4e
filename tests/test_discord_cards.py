"""A character card's picture on Discord: the partner speaks in a server channel through a
webhook of its own that carries its avatar (real discord.py against the fake Discord)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from partners.cards import plan_import, write_import
from partners.catalog import PartnerCatalog
from tests import card_fixtures as cards
from tests.discord_harness import (
    ALICE,
    BOB,
    BOT_ID,
    CHANNEL,
    OWNER,
    TIMEOUT,
    DiscordGateways,
    tea_house,  # noqa: F401 (the fake fixtures)
)
from tests.fakes.fake_discord import FakeDiscord
from tests.fakes.fake_llm import FakeLLM, Reply


@pytest.fixture
async def gateways(
    fake: FakeDiscord, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[DiscordGateways]:
    gateways = DiscordGateways(fake, fake_llm, tmp_path / "data")
    root = tmp_path / "data" / "partners"
    PartnerCatalog(root).ensure_example()  # Mira, beside the card's partner
    write_import(plan_import(cards.png(cards.v2()), "sirin.png", "sirin", root), root)
    yield gateways
    await gateways.stop_all()


def avatar_of(gateways: DiscordGateways) -> bytes:
    return (gateways.data_dir / "partners" / "sirin" / "avatar.png").read_bytes()


async def say(fake: FakeDiscord, text: str, replies: int) -> None:
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=f"<@{BOT_ID}> {text}", mentions=[BOT_ID]
    )
    await fake.wait_until(
        lambda: len(fake.webhook_messages()) == replies, TIMEOUT, f"reply {replies}"
    )


async def test_a_card_partner_speaks_with_its_own_picture(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start(bind=[(CHANNEL, "sirin")])
    fake_llm.script(Reply(text="Hello from the studio"), Reply(text="Still here"))
    await say(fake, "hi Sirin", 1)
    await say(fake, "again", 2)
    [hook] = fake.webhooks(CHANNEL)  # one webhook of its own, made once
    assert fake.webhook_avatars[int(hook["id"])] == avatar_of(gateways)
    first, second = fake.webhook_messages()
    assert first.path.startswith(f"/webhooks/{hook['id']}/")
    assert first.json["username"] == "Ŝirin 🌙" and "avatar_url" not in first.json
    assert second.path == first.path
    assert len(fake_llm.requests) == 2  # its own webhook's messages are not taken for users'


async def test_a_new_picture_changes_the_webhook_avatar(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(bind=[(CHANNEL, "sirin")])
    fake_llm.script(Reply(text="one"), Reply(text="two"))
    await say(fake, "hi", 1)
    new_picture = cards.image_png((200, 10, 10))
    (gateways.data_dir / "partners" / "sirin" / "avatar.png").write_bytes(new_picture)
    gateway.app.catalog.reload()
    await say(fake, "hi again", 2)
    [hook] = fake.webhooks(CHANNEL)
    assert fake.webhook_avatars[int(hook["id"])] == new_picture


async def test_a_full_channel_falls_back_to_the_shared_webhook_without_the_picture(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    for number in range(14):
        fake.add_webhook(CHANNEL, f"other {number}")
    await gateways.start(bind=[(CHANNEL, "example"), (CHANNEL, "sirin")])
    fake_llm.script(Reply(text="Mira here"), Reply(text="Sirin here"))
    await say(fake, "Mira, hello", 1)  # the shared webhook takes the 15th place
    await say(fake, "Ŝirin 🌙, hello", 2)
    mira, sirin = fake.webhook_messages()
    assert mira.json["username"] == "Mira" and sirin.json["username"] == "Ŝirin 🌙"
    assert sirin.path == mira.path  # the shared webhook, named for each
    assert len(fake.webhooks(CHANNEL)) == 15


async def test_owner_imports_a_card_sent_in_a_discord_dm(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    gateway = await gateways.start()
    owner_dm = fake.dm_channel_id(OWNER)
    card = cards.png(cards.v3(cards.card_data(name="Kai")), keyword="ccv3")
    await fake.dm_message(
        user_id=OWNER,
        content="/admin partner import",
        attachments=[{"filename": "kai.png", "data": card}],
    )
    await fake.wait_until(lambda: fake.sent_messages(owner_dm), TIMEOUT, "the summary")
    summary = fake.sent_messages(owner_dm)[0].json["content"]
    assert "Import Kai from kai.png?" in summary and "lorebook entries: 2" in summary
    confirm = next(line for line in summary.splitlines() if line.startswith("Send /admin"))
    command = confirm.removeprefix("Send ").removesuffix(" to create it.")
    await fake.dm_message(user_id=OWNER, content=command)
    await fake.wait_until(lambda: len(fake.sent_messages(owner_dm)) == 2, TIMEOUT, "created")
    assert "Created Kai (kai)" in fake.sent_messages(owner_dm)[1].json["content"]
    assert gateway.app.catalog.require("kai").avatar_image is not None
    assert len(fake.cdn_downloads) == 1


async def test_a_strangers_file_with_a_command_is_not_downloaded(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start()
    alice_dm = fake.dm_channel_id(ALICE)
    await fake.dm_message(
        user_id=ALICE,
        content="/help",
        attachments=[{"filename": "big.png", "data": cards.png(cards.v2())}],
    )
    await fake.wait_until(lambda: fake.sent_messages(alice_dm), TIMEOUT, "the help")
    assert fake.cdn_downloads == []  # only the owner's /admin commands take files


async def test_a_strangers_card_with_the_import_command_is_never_downloaded(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    """A file costs a download only once the gateway knows its sender may use it: whatever
    a stranger's message says, nothing is fetched from Discord."""
    await gateways.start(access={"dm_policy": "pairing"})
    alice_dm = fake.dm_channel_id(ALICE)
    await fake.dm_message(
        user_id=ALICE,
        content="/admin partner import",
        attachments=[{"filename": "kai.png", "data": cards.png(cards.v2())}],
    )
    await fake.wait_until(lambda: fake.sent_messages(alice_dm), TIMEOUT, "the pairing reply")
    assert "your code is" in fake.sent_messages(alice_dm)[0].json["content"]
    assert fake.cdn_downloads == []


async def test_a_channel_members_card_with_the_import_command_is_never_downloaded(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    await fake.message_create(
        channel_id=CHANNEL,
        author_id=BOB,
        content=f"/admin partner import <@{BOT_ID}>",
        mentions=[BOT_ID],
        attachments=[{"filename": "kai.png", "data": cards.png(cards.v2())}],
    )
    fake_llm.script(Reply(text="Hello Bob"))
    await say(fake, "hello", 1)  # one channel is handled in order: the card's turn came first
    assert fake.cdn_downloads == []
