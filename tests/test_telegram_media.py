"""Voice, photos, stickers and reactions on Telegram, end to end: the real
python-telegram-bot and openai clients against the fake Bot API and the fake OpenAI-compatible
server (chat, transcriptions, speech)."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from typing import Any

from PIL import Image

from bot.store import MessageRow, Store
from partners.catalog import PartnerCatalog
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.ogg_opus import make_ogg_opus
from tests.telegram_harness import (
    BOT_USERNAME,
    OWNER,
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

ALICE = 501
BOB = 502
SPEECH = {"stt_model": "whisper-1", "tts_model": "tts-1"}
VOICE = make_ogg_opus(2)


def request_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


def preset_lines(gateways: TelegramGateways, *lines: str) -> None:
    """Add lines to the example partner's preset.yml before the gateway starts."""
    catalog = PartnerCatalog(gateways.data_dir / "partners")
    catalog.ensure_example()
    with (gateways.data_dir / "partners" / "example" / "preset.yml").open("a") as preset:
        preset.write("\n".join(lines) + "\n")


async def user_rows(store: Store, user_id: int) -> list[MessageRow]:
    """What the store keeps of a user's own messages to the example partner."""
    rows = await store.user_messages("example", f"telegram:{user_id}")
    return [row for row in rows if row.role == "user"]


# ---- voice in, voice out -------------------------------------------------------------------


async def test_voice_note_is_transcribed_and_answered_with_a_voice_bubble_in_auto(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech=SPEECH)
    fake_llm.script_transcripts("I walked by the sea today")
    fake_llm.script(Reply(text="The **sea**! Was it windy?"))
    update = fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE, duration=2)
    [voice] = await fake.wait_for_sent(chat_id=ALICE, method="sendVoice")
    [heard] = fake_llm.transcriptions
    assert heard.data == VOICE and heard.format == "ogg"
    assert "(voice message)] I walked by the sea today" in request_text(fake_llm.requests[0])
    # the text is the caption, formatted; the speech engine got it without markup
    assert voice.params["caption"] == "The <b>sea</b>! Was it windy?"
    assert [s.input for s in fake_llm.speeches] == ["The sea! Was it windy?"]
    assert voice.files["voice"][1].startswith(b"OggS")
    actions = [c.params["action"] for c in fake.sent("sendChatAction", ALICE)]
    assert "record_voice" in actions  # while the reply was being spoken
    assert fake.sent("sendMessage", ALICE) == []
    # the transcript is the text of record; the file id stays in the stored row
    store = gateway.app.store
    [row] = [
        m for m in await store.user_messages("example", f"telegram:{ALICE}") if m.role == "user"
    ]
    assert row.text == "I walked by the sea today"
    media = (await store.media_for([row.id]))[row.id]
    assert media[0].ref == update["message"]["voice"]["file_id"]
    assert not (gateways.data_dir / "partners" / "example" / "audio").exists()  # not kept


async def test_after_voice_off_a_voice_note_gets_a_text_reply(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    fake.send_user_message(chat_id=ALICE, text="/voice off")
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert "text only" in (answer.text or "")
    fake_llm.script(Reply(text="Got it in writing."))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake.wait_for_sent(lambda c: c.text == "Got it in writing.", chat_id=ALICE)
    assert fake.sent("sendVoice", ALICE) == [] and fake_llm.speeches == []


async def test_voice_on_speaks_replies_to_text_too_and_tts_failure_falls_back_to_text(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    fake.send_user_message(chat_id=ALICE, text="/voice on")
    await fake.wait_for_sent(chat_id=ALICE)
    fake_llm.script(Reply(text="Spoken hello"))
    fake.send_user_message(chat_id=ALICE, text="hi")
    [voice] = await fake.wait_for_sent(chat_id=ALICE, method="sendVoice")
    assert voice.params["caption"] == "Spoken hello"
    fake_llm.speech_down = True
    fake_llm.script(Reply(text="Written instead"))
    fake.send_user_message(chat_id=ALICE, text="again")
    await fake.wait_for_sent(lambda c: c.text == "Written instead", chat_id=ALICE)
    assert len(fake.sent("sendVoice", ALICE)) == 1


async def test_long_reply_is_spoken_without_code_or_links_and_its_text_follows(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    words = "Here is the recipe you asked for. " * 40  # longer than a caption
    text = f"{words}\n\n```python\nprint('secret code')\n```\nMore at https://example.org/x"
    fake_llm.script_transcripts("how do I cook it")
    fake_llm.script(Reply(text=text))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    [voice] = await fake.wait_for_sent(chat_id=ALICE, method="sendVoice")
    assert "caption" not in voice.params
    [spoken] = fake_llm.speeches
    assert "recipe" in spoken.input
    assert "secret code" not in spoken.input and "example.org" not in spoken.input
    sent = await fake.wait_for_sent(chat_id=ALICE)
    assert "print('secret code')" in "".join(c.text or "" for c in sent)


async def test_without_speech_a_voice_note_gets_one_polite_line_a_day_and_captions_are_answered(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()  # no [speech] models
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    [polite] = await fake.wait_for_sent(chat_id=ALICE)
    assert "can't listen to voice messages" in (polite.text or "")
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    fake_llm.script(Reply(text="About the caption"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE, caption="and this caption")
    await fake.wait_for_sent(lambda c: c.text == "About the caption", chat_id=ALICE)
    await settled(fake, gateway)
    texts = [c.text for c in fake.sent("sendMessage", ALICE)]
    assert texts == [polite.text, "About the caption"]  # the second note: no second line
    assert len(fake_llm.requests) == 1 and "and this caption" in fake_llm.last_user_text()
    assert fake_llm.transcriptions == []


async def test_failing_transcription_is_treated_like_no_speech(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    fake_llm.speech_down = True
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    [polite] = await fake.wait_for_sent(chat_id=ALICE)
    assert "can't listen to voice messages" in (polite.text or "")
    assert len(fake_llm.transcriptions) >= 1 and fake_llm.requests == []


async def test_a_voice_note_over_the_limit_gets_a_clear_answer_and_nothing_is_stored(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech=SPEECH)
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE, duration=30 * 60)
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert "30 minutes long" in (answer.text or "") and "5 minutes" in (answer.text or "")
    await settled(fake, gateway)
    assert await gateway.app.store.user_messages("example", f"telegram:{ALICE}") == []
    assert fake_llm.transcriptions == [] and fake_llm.requests == []
    assert fake.file_downloads() == []


# ---- markers and reactions ---------------------------------------------------------------


async def test_reaction_marker_becomes_a_reaction_and_is_never_shown_or_spoken(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech=SPEECH)
    fake_llm.script_transcripts("I passed the exam")
    fake_llm.script(Reply(text="[[react:❤️]] I'm so proud of you!"))
    update = fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    [voice] = await fake.wait_for_sent(chat_id=ALICE, method="sendVoice")
    message_id = update["message"]["message_id"]
    assert fake.reactions[(ALICE, message_id)] == [{"type": "emoji", "emoji": "❤"}]
    assert voice.params["caption"] == "I'm so proud of you!"
    assert [s.input for s in fake_llm.speeches] == ["I'm so proud of you!"]
    history = await gateway.app.store.user_messages("example", f"telegram:{ALICE}")
    assert not any("[[" in m.text for m in history)


async def test_reaction_alone_is_the_whole_answer_and_silent_says_nothing(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    fake_llm.script(Reply(text="[[react:👍]]"), Reply(text="[[silent]]"))
    first = fake.send_user_message(chat_id=ALICE, text="done!")
    await fake.wait_until(
        lambda: fake.reactions.get((ALICE, first["message"]["message_id"])), description="react"
    )
    fake.send_user_message(chat_id=ALICE, text="ok bye")
    await settled(fake, gateway)
    assert fake.sent("sendMessage", ALICE) == []


async def test_a_reaction_telegram_does_not_allow_is_not_sent_and_the_text_still_is(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake_llm.script(Reply(text="[[react:🐱]] Meow to you too"))
    fake.send_user_message(chat_id=ALICE, text="meow")
    await fake.wait_for_sent(lambda c: c.text == "Meow to you too", chat_id=ALICE)
    assert fake.sent("setMessageReaction") == [] and fake.reactions == {}


async def test_sticker_marker_sends_the_owners_sticker(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake.add_file("CAACAgHappy", b"RIFF happy sticker")
    preset_lines(gateways, "stickers:", "  happy: CAACAgHappy")
    await gateways.start()
    fake_llm.script(Reply(text="Yay! [[sticker:happy]] [[sticker:unknown]]"))
    fake.send_user_message(chat_id=ALICE, text="I got the job")
    [sticker] = await fake.wait_for_sent(chat_id=ALICE, method="sendSticker")
    assert sticker.params["sticker"] == "CAACAgHappy"
    [text] = await fake.wait_for_sent(chat_id=ALICE)
    assert text.text == "Yay!"


async def test_sticker_in_arrives_as_its_emoji_and_set(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake_llm.script(Reply(text="[[react:❤]]"))
    update = fake.send_user_message(
        chat_id=ALICE, sticker=True, sticker_emoji="😂", sticker_set="FunnyCats"
    )
    await fake.wait_until(
        lambda: fake.reactions.get((ALICE, update["message"]["message_id"])), description="❤"
    )
    assert fake_llm.last_user_text().endswith("[sticker 😂 from set FunnyCats]")


async def test_a_users_reaction_reaches_the_next_turn_without_a_model_call(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    fake_llm.script(Reply(text="Here's a poem about tea."))
    fake.send_user_message(chat_id=ALICE, text="write me a poem")
    [poem] = await fake.wait_for_sent(chat_id=ALICE)
    # the reply's delivery is recorded, as it is long before a person reacts
    await settled(fake, gateway)
    fake.push_update(
        fake.reaction_update(chat_id=ALICE, message_id=poem.result["message_id"], emoji="🔥")
    )
    await settled(fake, gateway)
    assert len(fake_llm.requests) == 1  # the reaction alone costs no model call
    fake_llm.script(Reply(text="Glad you liked it"))
    fake.send_user_message(chat_id=ALICE, text="another?")
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    context = request_text(fake_llm.requests[1])
    assert "Alice reacted 🔥 to your message “Here's a poem about tea.”" in context


# ---- photos ------------------------------------------------------------------------------


def png(color: tuple[int, int, int] = (200, 40, 40), size: int = 2000) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (size, size // 2), color).save(out, "PNG")
    return out.getvalue()


async def test_photo_reaches_a_vision_partner_as_a_downscaled_image_part(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true")
    gateway = await gateways.start(llm={"image_max_side": 512})
    fake_llm.script(Reply(text="That pasta looks great"))
    update = fake.send_user_message(chat_id=ALICE, photo=True, media=png(), caption="dinner!")
    await fake.wait_for_sent(chat_id=ALICE)
    [part] = fake_llm.image_parts
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(part.data))
    assert max(image.size) == 512 and image.format == "JPEG"
    assert "(photo)] dinner!" in request_text(fake_llm.requests[0])
    # referenced by file id, never copied into the store
    [row] = [
        m
        for m in await gateway.app.store.user_messages("example", f"telegram:{ALICE}")
        if m.role == "user"
    ]
    [media] = (await gateway.app.store.media_for([row.id]))[row.id]
    assert media.ref == update["message"]["photo"][-1]["file_id"]
    db = (gateways.data_dir / "gateway.db").read_bytes()
    assert part.data not in db


async def test_photo_for_a_partner_that_cannot_see_is_described_by_the_vision_model(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(llm={"vision_model": "vision-model"})
    fake_llm.script(Reply(text="A plate of spaghetti with basil."), Reply(text="Spaghetti, yum!"))
    fake.send_user_message(chat_id=ALICE, photo=True, media=png())
    await fake.wait_for_sent(lambda c: c.text == "Spaghetti, yum!", chat_id=ALICE)
    describe, answer = fake_llm.requests
    assert describe["model"] == "vision-model" and len(fake_llm.image_parts) == 1
    assert fake_llm.image_parts[0].request_index == 0
    assert "[photo: A plate of spaghetti with basil.]" in fake_llm.last_user_text(answer)
    assert "image_url" not in request_text(answer)


async def test_photo_with_no_one_to_see_it_is_named_so_the_partner_answers_kindly(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake_llm.script(Reply(text="I can't see pictures, but tell me about it!"))
    fake.send_user_message(chat_id=ALICE, photo=True, media=png())
    await fake.wait_for_sent(chat_id=ALICE)
    assert "a photo you cannot see" in fake_llm.last_user_text()
    assert fake_llm.image_parts == [] and fake.file_downloads() == []


async def test_one_users_photo_never_reaches_another_users_request(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true", "memory_scope: shared")
    await gateways.start()
    fake_llm.script(Reply(text="Nice cat"), Reply(text="Hello Bob"))
    fake.send_user_message(chat_id=ALICE, photo=True, media=png((10, 10, 10)))
    await fake.wait_for_sent(chat_id=ALICE)
    fake.send_user_message(chat_id=BOB, text="hi", first_name="Bob")
    await fake.wait_for_sent(chat_id=BOB)
    assert [p.request_index for p in fake_llm.image_parts] == [0]
    assert "image_url" not in request_text(fake_llm.requests[1])


async def test_a_group_photo_is_fetched_only_when_the_partner_is_addressed(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true")
    gateway = await gateways.start()
    group = -100777
    await gateway.app.store.bind("telegram", str(group), "example", "command")
    fake.send_user_message(chat_id=group, chat_type="supergroup", photo=True, media=png())
    caption = f"@{BOT_USERNAME} look"
    fake_llm.script(Reply(text="I see it"))
    fake.send_user_message(
        chat_id=group, chat_type="supergroup", photo=True, media=png((1, 2, 3)),
        caption=caption, entities=fake.mention_entity(caption),
    )  # fmt: skip
    await fake.wait_for_sent(chat_id=group)
    assert len(fake_llm.image_parts) == 1 and len(fake.file_downloads()) == 1
    assert "[photo]" in request_text(fake_llm.requests[0])  # the first, as context


# ---- forgetting and export -------------------------------------------------------------------


async def test_forget_history_removes_transcripts_and_image_references(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech=SPEECH)
    fake.send_user_message(chat_id=ALICE, text="/voice off")
    await fake.wait_for_sent(chat_id=ALICE)
    fake_llm.script_transcripts("my secret plan is to move to Lisbon")
    fake_llm.script(Reply(text="Exciting!"), Reply(text="Pretty"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    fake.send_user_message(chat_id=ALICE, photo=True, media=png())
    await fake.wait_for_sent(chat_id=ALICE, count=3)
    store = gateway.app.store
    rows = await store.user_messages("example", f"telegram:{ALICE}")
    ids = [m.id for m in rows]
    assert len(await store.media_for(ids)) == 2
    assert await store.search("example", "Lisbon", None, 10)
    fake.send_user_message(chat_id=ALICE, text="/forget history confirm")
    await fake.wait_for_sent(chat_id=ALICE, count=4)
    assert await store.search("example", "Lisbon", None, 10) == []
    assert await store.media_for(ids) == {}
    assert b"secret plan" not in (gateways.data_dir / "gateway.db").read_bytes()


async def test_export_lists_transcripts_as_spoken_and_image_ids(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech={"stt_model": "whisper-1"})
    fake_llm.script_transcripts("remember my cat Tofu")
    fake_llm.script(Reply(text="Tofu!"), Reply(text="Cute"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake.wait_for_sent(chat_id=ALICE)
    photo = fake.send_user_message(chat_id=ALICE, photo=True, media=png())
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    fake.send_user_message(chat_id=ALICE, text="/export")
    [document] = await fake.wait_for_sent(chat_id=ALICE, method="sendDocument")
    with zipfile.ZipFile(io.BytesIO(document.files["document"][1])) as archive:
        exported = json.loads(archive.read("export.json"))
    mine = [m for m in exported["messages"] if m["role"] == "user"]
    assert mine[0]["text"] == "remember my cat Tofu" and mine[0]["spoken"] is True
    assert mine[1]["images"] == [photo["message"]["photo"][-1]["file_id"]]
    assert "spoken" not in mine[1]


async def test_usage_counts_seconds_heard_characters_spoken_and_images(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true")
    gateway = await gateways.start(
        speech={**SPEECH, "price_per_minute": 0.006, "budget_tokens_per_minute": 6000}
    )
    fake_llm.script_transcripts("a long story")
    fake_llm.script(Reply(text="Tell me more", prompt_tokens=10, completion_tokens=5))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE, duration=45)
    await fake.wait_for_sent(chat_id=ALICE, method="sendVoice")
    fake_llm.script(Reply(text="Lovely view", prompt_tokens=10, completion_tokens=5))
    fake.send_user_message(chat_id=ALICE, photo=True, media=png(), caption="the view")
    await fake.wait_until(lambda: len(fake_llm.requests) == 2, description="photo turn")
    await settled(fake, gateway)
    store = gateway.app.store
    rows = await store.usage("2000-01-01")
    units = {row["kind"]: row["units"] for row in rows if row["units"]}
    assert units == {"transcription": 45, "speech": len("Tell me more"), "image": 1}
    # in the daily budget: 45 s at 6000 tokens a minute, 1000 for the image, 1 per spoken
    # character and the chat tokens
    budget = gateway.app.runner.budget
    assert budget is not None
    assert (await budget.tokens_today())["example"] == 4500 + 1000 + 12 + 2 * (10 + 5)
    fake.send_user_message(chat_id=OWNER, text="/admin usage")
    [report] = await fake.wait_for_sent(lambda c: "heard" in (c.text or ""), chat_id=OWNER)
    assert "transcription: 45 s heard ≈ 0.0045" in (report.text or "")
    assert "image: 1 images" in (report.text or "")


async def test_a_voice_note_is_stored_before_it_is_heard_and_holds_up_no_other_chat(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech=SPEECH)
    fake_llm.transcription_gate = asyncio.Event()
    fake_llm.script_transcripts("slow words")
    update = fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake_llm.wait_for_transcriptions(1)
    # while Alice's note is being transcribed, it is stored already, with its file id
    [row] = await user_rows(gateway.app.store, ALICE)
    assert row.status == "pending" and row.text == ""
    [media] = (await gateway.app.store.media_for([row.id]))[row.id]
    assert media.ref == update["message"]["voice"]["file_id"]
    # ... and Bob, in his own chat, is answered meanwhile
    fake_llm.script(Reply(text="Hi Bob"))
    fake.send_user_message(chat_id=BOB, text="hello", first_name="Bob")
    await fake.wait_for_sent(chat_id=BOB)
    assert fake.sent("sendVoice", ALICE) == [] and fake.sent("sendMessage", ALICE) == []
    fake_llm.script(Reply(text="Heard you"))
    fake_llm.transcription_gate.set()
    [voice] = await fake.wait_for_sent(chat_id=ALICE, method="sendVoice")
    assert voice.params["caption"] == "Heard you"


async def test_keep_audio_keeps_the_voice_note_until_history_is_forgotten(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech={"stt_model": "whisper-1", "keep_audio": True})
    fake_llm.script(Reply(text="Kept"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake.wait_for_sent(chat_id=ALICE)
    [row] = await user_rows(gateway.app.store, ALICE)
    kept = gateways.data_dir / "partners" / "example" / "audio" / f"{row.id}.ogg"
    assert kept.read_bytes() == VOICE
    fake.send_user_message(chat_id=ALICE, text="/forget history confirm")
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    assert not kept.exists()


async def test_a_streamed_preview_never_shows_a_marker(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(telegram={"stream": True})
    group = -100888
    await gateway.app.store.bind("telegram", str(group), "example", "command")
    fake_llm.script(Reply(text="[[react:👍]] Sounds like a plan, let's do it [[sticker:none]]"))
    text = f"@{BOT_USERNAME} shall we?"
    fake.send_user_message(
        chat_id=group, chat_type="supergroup", text=text, entities=fake.mention_entity(text)
    )
    await fake.wait_until(lambda: fake.reactions, description="the reaction")
    await settled(fake, gateway)
    edits = ("sendMessage", "editMessageText")
    shown = [
        c.text or "" for c in fake.calls if c.method in edits and c.params.get("chat_id") == group
    ]
    assert shown and all("[[" not in t and "react" not in t for t in shown)
    assert any("Sounds like a plan, let's do it" in t for t in shown)


async def test_a_session_opened_by_a_voice_note_is_titled_by_its_transcript(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech={"stt_model": "whisper-1"})
    fake_llm.script_transcripts("planning a trip to Kyoto")
    fake_llm.script(Reply(text="How exciting"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake.wait_for_sent(chat_id=ALICE)
    [session] = await gateway.app.store.partner_sessions("example")
    assert session.title == "planning a trip to Kyoto"


async def test_audio_files_and_video_notes_are_heard_like_voice_notes(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech={"stt_model": "whisper-1"})
    fake_llm.script_transcripts("a song I wrote", "hello from the round video")
    fake_llm.script(Reply(text="Lovely song"), Reply(text="Nice to see you"))
    fake.send_user_message(chat_id=ALICE, audio=True, media=b"ID3 an mp3")
    await fake.wait_for_sent(chat_id=ALICE)
    fake.send_user_message(chat_id=ALICE, video_note=True, media=b"an mp4")
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    assert [(t.format, t.data) for t in fake_llm.transcriptions] == [
        ("mp3", b"ID3 an mp3"),
        ("mp4", b"an mp4"),
    ]
    assert "(voice message)] hello from the round video" in fake_llm.last_user_text()


async def test_an_image_sent_as_a_file_is_a_photo(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true")
    await gateways.start()
    update = fake.message_update(chat_id=ALICE, document=True)
    document = update["message"]["document"]
    fake.add_file(document["file_id"], png(), "documents/full.png")
    document.update(mime_type="image/png", file_name="full.png")
    fake.push_update(update)
    fake_llm.script(Reply(text="Sharp picture"))
    await fake.wait_for_sent(chat_id=ALICE)
    assert len(fake_llm.image_parts) == 1


async def test_media_of_chats_answered_side_by_side_is_booked_once_each(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    preset_lines(gateways, "vision: true")
    gateway = await gateways.start(speech={"stt_model": "whisper-1"})
    fake_llm.transcription_gate = asyncio.Event()
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE, duration=7)
    await fake_llm.wait_for_transcriptions(1)
    fake_llm.script(Reply(text="Nice photo, Bob"))
    fake.send_user_message(chat_id=BOB, photo=True, media=png(), first_name="Bob")
    await fake.wait_for_sent(chat_id=BOB)
    fake_llm.script(Reply(text="Heard you, Alice"))
    fake_llm.transcription_gate.set()
    await fake.wait_for_sent(chat_id=ALICE)
    await settled(fake, gateway)
    rows = await gateway.app.store.usage("2000-01-01")
    units = {row["kind"]: row["units"] for row in rows if row["units"]}
    assert units == {"transcription": 7, "image": 1}
    assert "image_url" not in request_text(fake_llm.requests[-1])  # Alice's turn: no photo
