"""Markup from names, memory and the model reaches users as text: Telegram gets escaped HTML it
accepts (the fake refuses what Telegram would), and no Discord message can ping a crowd."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from partners.catalog import PartnerCatalog
from partners.preset_edit import set_preset_value
from tests.discord_harness import ALICE, CHANNEL, GUILD, OWNER, TIMEOUT, DiscordGateways
from tests.fakes.fake_discord import FakeDiscord, point_discord_at
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import BOT_USERNAME, GROUP, TelegramGateways

USER = 501
EVIL_NAME = '<b>Sol</b> & <a href="tg://x">co</a>'
EVIL_MEMORY = "I love <script>alert(1)</script> & **bold** <i>"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(bot_username=BOT_USERNAME, can_read_all_group_messages=True) as fake:
        yield fake  # validate_markup is on: HTML Telegram would refuse fails the send


@pytest.fixture
async def gateways(
    telegram: FakeTelegram, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[TelegramGateways]:
    gateways = TelegramGateways(telegram, fake_llm, tmp_path / "data")
    yield gateways
    await gateways.stop_all()


async def test_markup_in_a_partner_name_is_shown_as_text_on_telegram(
    gateways: TelegramGateways, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    set_preset_value(gateways.data_dir / "partners" / "sol" / "preset.yml", "name", EVIL_NAME)
    gateway = await gateways.start()
    for partner in ("example", "sol"):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    fake_llm.script(Reply(text="Sunny."))
    telegram.send_user_message(chat_id=GROUP, chat_type="supergroup", text=f"{EVIL_NAME}, hi")
    [reply] = await telegram.wait_for_sent(chat_id=GROUP)
    assert reply.params["parse_mode"] == "HTML"
    assert reply.result["text"] == f"{EVIL_NAME}: Sunny."  # what the user sees
    assert "<a href" not in (reply.text or "")


async def test_markup_in_memory_and_model_text_is_shown_as_text_on_telegram(
    gateways: TelegramGateways, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    users = gateway.app.catalog.require("example").dir / "users"
    users.mkdir(parents=True, exist_ok=True)
    (users / f"telegram-{USER}.md").write_text(f"- {EVIL_MEMORY} <!-- m_1a2b3c4d5e6f7 -->\n")
    telegram.send_user_message(chat_id=USER, text="/memory")
    [listing] = await telegram.wait_for_sent(chat_id=USER)
    assert EVIL_MEMORY.replace("**bold**", "bold") in listing.result["text"]
    assert "<script>" not in (listing.text or "")

    fake_llm.script(Reply(text="[click me](javascript:alert(1)) <img src=x onerror=alert(1)>"))
    telegram.send_user_message(chat_id=USER, text="show me a link")
    replies = await telegram.wait_for_sent(chat_id=USER, count=2)
    sent = replies[1]
    assert 'href="javascript' not in (sent.text or "") and "click me" in sent.result["text"]
    assert "<img" in sent.result["text"] and "<img" not in (sent.text or "")


# ---- Discord --------------------------------------------------------------------------


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(manage_webhooks=False) as server:
        server.add_guild(GUILD, "Tea House", owner_id=OWNER)
        server.add_text_channel(GUILD, CHANNEL, "general")
        server.add_user(ALICE, "alice")
        restore = point_discord_at(server)
        try:
            yield server
        finally:
            restore()


async def test_a_partner_name_and_memory_with_mentions_ping_nobody_on_discord(
    discord: FakeDiscord, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    gateways = DiscordGateways(discord, fake_llm, tmp_path / "data")
    catalog = PartnerCatalog(tmp_path / "data" / "partners")
    catalog.ensure_example()
    set_preset_value(catalog.root / "example" / "preset.yml", "name", "@everyone <@&77>")
    try:
        await gateways.start()
        fake_llm.script(Reply(text="@here I remember: <@&77> and @everyone"))
        await discord.message_create(
            channel_id=CHANNEL, author_id=ALICE, content="<@900> hi", mentions=[900]
        )
        sends = await discord.wait_until(
            lambda: discord.sent_messages(CHANNEL), TIMEOUT, "the reply in the channel"
        )
        for call in sends:
            assert call.json["allowed_mentions"]["parse"] == []
            assert not call.json["allowed_mentions"].get("roles")
        assert "@everyone" in sends[0].json["content"]  # shown, as text
        assert not any(m["mention_everyone"] for m in discord.messages_in(CHANNEL))
    finally:
        await gateways.stop_all()
