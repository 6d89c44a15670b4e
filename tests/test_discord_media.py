"""Voice, photos, stickers and reactions on Discord, end to end: real discord.py and openai
clients against the fake Discord (REST, gateway, CDN) and the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from PIL import Image

from bot.store import MessageRow, Store
from partners.catalog import PartnerCatalog
from tests.discord_harness import (
    ALICE,
    BOB,
    BOT_ID,
    CHANNEL,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    eventually,
    posts_to,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import FLAG_VOICE_MESSAGE, FakeDiscord, RestCall
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.ogg_opus import make_ogg_opus, ogg_opus_seconds

SPEECH = {"stt_model": "whisper-1", "tts_model": "tts-1"}
VOICE = make_ogg_opus(3)


def voice_message() -> dict[str, Any]:
    return {
        "filename": "voice-message.ogg",
        "data": VOICE,
        "content_type": "audio/ogg",
        "duration_secs": 3.0,
        "waveform": "AAAA",
    }


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1600, 900), (30, 160, 90)).save(out, "PNG")
    return out.getvalue()


async def stored_reactions(store: Store, chat_key: str) -> list[MessageRow]:
    """The reactions the gateway keeps for a chat, once there are any."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            rows = await store.recent_reactions(chat_key, "example", 0, 5)
            if rows:
                return rows
            await asyncio.sleep(0.01)


async def recorded(store: Store, chat_key: str, message_id: str) -> None:
    """Wait until the gateway has recorded a reply's Discord message id (after the post
    returned): a reaction to it can be matched from then on."""
    async with asyncio.timeout(TIMEOUT):
        while True:
            if await store.reply_for_platform_message(chat_key, message_id) is not None:
                return
            await asyncio.sleep(0.01)


def reactions(fake: FakeDiscord) -> list[RestCall]:
    return [c for c in fake.rest_calls if c.method == "PUT" and "/reactions/" in c.path and c.ok]


async def test_voice_message_is_transcribed_and_answered_with_audio_and_its_text(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    fake_llm.script_transcripts("what should I cook tonight")
    fake_llm.script(Reply(text="How about **risotto**?"))
    await fake.dm_message(
        user_id=ALICE, content="", flags=FLAG_VOICE_MESSAGE, attachments=[voice_message()]
    )
    reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    [heard] = fake_llm.transcriptions
    assert heard.data == VOICE
    assert "(voice message)] what should I cook tonight" in json.dumps(
        fake_llm.requests[0]["messages"], ensure_ascii=False
    )
    [(name, audio)] = reply.files
    assert name == "reply.ogg" and ogg_opus_seconds(audio) > 0
    assert reply.json["content"] == "How about **risotto**?"
    assert [s.input for s in fake_llm.speeches] == ["How about risotto?"]


async def test_an_image_attachment_reaches_a_vision_partner(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    catalog = PartnerCatalog(gateways.data_dir / "partners")
    catalog.ensure_example()
    with (gateways.data_dir / "partners" / "example" / "preset.yml").open("a") as preset:
        preset.write("vision: true\n")
    await gateways.start()
    fake_llm.script(Reply(text="What a green field"))
    await fake.dm_message(
        user_id=ALICE, content="look", attachments=[{"filename": "field.png", "data": png()}]
    )
    await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    [part] = fake_llm.image_parts
    assert max(Image.open(io.BytesIO(part.data)).size) == 1024
    assert "[attached" not in fake_llm.last_user_text()


async def test_reaction_marker_becomes_add_reaction_on_the_users_message(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake_llm.script(Reply(text="Congratulations! [[react:🎉]]"))
    sent = await fake.dm_message(user_id=ALICE, content="I got the job")
    reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    assert reply.json["content"] == "Congratulations!"
    await eventually(lambda: bool(reactions(fake)), "the reaction")
    [reaction] = reactions(fake)
    assert f"/messages/{sent['id']}/reactions/" in reaction.path


async def test_a_users_reaction_reaches_the_next_turn_without_a_model_call(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    fake_llm.script(Reply(text="A haiku for you"))
    await fake.dm_message(user_id=ALICE, content="a haiku?")
    dm = fake.dm_channel_id(ALICE)
    reply = await fake.wait_for_rest(posts_to(dm), TIMEOUT)
    await recorded(gateway.app.store, f"discord:{ALICE}", str(reply.response["id"]))
    await fake.reaction_add(
        channel_id=dm, message_id=int(reply.response["id"]), user_id=ALICE, emoji="😍"
    )
    [row] = await stored_reactions(gateway.app.store, f"discord:{ALICE}")
    assert "reacted 😍" in row.text
    assert len(fake_llm.requests) == 1
    fake_llm.script(Reply(text="Glad!"))
    await fake.dm_message(user_id=ALICE, content="another")
    await fake.wait_for_rest(lambda c: posts_to(dm)(c) and c.json["content"] == "Glad!")
    assert "alice reacted 😍 to your message “A haiku for you”" in json.dumps(
        fake_llm.requests[1]["messages"], ensure_ascii=False
    )


async def test_a_strangers_reaction_costs_no_call_to_discord(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    """A reaction names its user by id only; after a restart discord.py knows nobody. The
    stranger is not looked up (the gateway keeps no reaction of theirs), and a user it
    serves is named as the gateway stored them when they last wrote."""
    access = {"dm_policy": "allowlist", "allow": [f"discord:{BOB}"]}
    first = await gateways.start(access=access)
    fake_llm.script(Reply(text="A haiku for you"))
    await fake.dm_message(user_id=BOB, content="a haiku?")
    await fake.dm_message(user_id=ALICE, content="let me in")
    bob_reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(BOB)), TIMEOUT)
    refusal = await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    await recorded(first.app.store, f"discord:{BOB}", str(bob_reply.response["id"]))
    await gateways.stop_all()
    gateway = await gateways.start(access=access)
    for user, sent in ((ALICE, refusal), (BOB, bob_reply)):
        await fake.reaction_add(
            channel_id=fake.dm_channel_id(user),
            message_id=int(sent.response["id"]),
            user_id=user,
            emoji="👍",
        )
    [row] = await stored_reactions(gateway.app.store, f"discord:{BOB}")
    assert row.text.startswith("bob reacted 👍")
    assert not [c for c in fake.rest_calls if c.path == f"/users/{ALICE}"]


async def test_a_sticker_arrives_as_its_name(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake_llm.script(Reply(text="Hi!"))
    await fake.dm_message(
        user_id=ALICE, content="", sticker_items=[{"id": "777", "name": "Wave", "format_type": 1}]
    )
    await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    assert fake_llm.last_user_text().endswith("[sticker Wave]")


async def test_a_spoken_reply_in_a_server_channel_comes_from_the_partners_webhook(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    fake_llm.script_transcripts("sing me something")
    fake_llm.script(Reply(text="La la la"))
    await fake.message_create(
        channel_id=CHANNEL,
        author_id=ALICE,
        content=f"<@{BOT_ID}> listen",
        mentions=[BOT_ID],
        attachments=[{"filename": "song.ogg", "data": VOICE, "content_type": "audio/ogg"}],
    )
    await eventually(lambda: bool(fake.webhook_messages()), "the webhook's message")
    [sent] = fake.webhook_messages()
    assert sent.json["content"] == "La la la" and sent.json["username"] == "Mira"
    assert [name for name, _ in sent.files] == ["reply.ogg"]
    assert "(voice message)] sing me something" in fake_llm.last_user_text()


async def test_without_speech_a_voice_message_gets_one_polite_line(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    await fake.dm_message(
        user_id=ALICE, content="", flags=FLAG_VOICE_MESSAGE, attachments=[voice_message()]
    )
    reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    assert "can't listen to voice messages" in reply.json["content"]
    assert fake_llm.requests == [] and fake_llm.transcriptions == []


async def test_a_voice_message_over_the_limit_is_refused_clearly(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech={**SPEECH, "max_seconds": 60})
    long_note = {**voice_message(), "duration_secs": 600.0}
    await fake.dm_message(
        user_id=ALICE, content="", flags=FLAG_VOICE_MESSAGE, attachments=[long_note]
    )
    reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    assert "10 minutes long" in reply.json["content"]
    assert await gateway.app.store.user_messages("example", f"discord:{ALICE}") == []
    assert fake_llm.transcriptions == []
