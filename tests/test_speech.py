"""Voice notes at the edges: every failure of the speech endpoint is a SpeechError, so a note
whose transcription broke gets the "write it for me" line rather than the generic apology; a
transcript is cut where typed text is; a kept note's file name is short and safe whatever the
sender called it; and the owner deletes kept notes with ``/admin voice forget``. The real
openai and python-telegram-bot clients against the fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.config.services import LLMConfig, SpeechConfig
from bot.services.speech import SpeechClient, SpeechError
from bot.turn.media import kept_suffix
from bot.turn.media_limits import CUT_NOTE, MAX_INBOUND_CHARS
from bot.turn.quiet import VOICE_UNHEARD
from tests.fakes.fake_llm import Cut, FakeLLM, Malformed, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.ogg_opus import make_ogg_opus
from tests.telegram_harness import (
    OWNER,
    Gateway,
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)
from tests.test_telegram_media import ALICE, SPEECH, VOICE, request_text, user_rows

CUT_TRANSCRIPT = Malformed('{"text": "I was saying that the weather')
"""A transcription answer whose body ends mid-way: valid headers, JSON cut short."""


@pytest.fixture
async def speech(fake_llm: FakeLLM) -> AsyncIterator[SpeechClient]:
    client = SpeechClient(
        SpeechConfig(stt_model="whisper-1", tts_model="tts-1"),
        LLMConfig(base_url=fake_llm.base_url, api_key="x"),
    )
    yield client
    await client.close()


# ---- the client ------------------------------------------------------------------------------


async def test_a_transcription_answer_cut_short_is_a_speech_error(
    fake_llm: FakeLLM, speech: SpeechClient
) -> None:
    fake_llm.script_transcripts(CUT_TRANSCRIPT)
    with pytest.raises(SpeechError, match="transcription failed"):
        await speech.transcribe(VOICE, "voice.ogg", "audio/ogg")


async def test_a_transcription_answer_that_is_not_utf8_is_a_speech_error(
    fake_llm: FakeLLM, speech: SpeechClient
) -> None:
    fake_llm.script_transcripts(Malformed(b'{"text": "caf\xe9"}'))
    with pytest.raises(SpeechError):
        await speech.transcribe(VOICE, "voice.ogg", "audio/ogg")


async def test_a_transcription_whose_connection_drops_is_a_speech_error(
    fake_llm: FakeLLM, speech: SpeechClient
) -> None:
    dropped = Cut(b'{"text": "I was saying that the weather"}', sent_bytes=12)
    fake_llm.script_transcripts(dropped, dropped)  # the client tries twice
    with pytest.raises(SpeechError):
        await speech.transcribe(VOICE, "voice.ogg", "audio/ogg")


# ---- voice notes in a turn ---------------------------------------------------------------------


async def test_a_voice_note_whose_transcription_is_cut_short_gets_the_write_it_line(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(speech=SPEECH)
    fake_llm.script_transcripts(CUT_TRANSCRIPT, CUT_TRANSCRIPT, CUT_TRANSCRIPT)
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    [polite] = await fake.wait_for_sent(chat_id=ALICE)
    assert polite.text == VOICE_UNHEARD
    assert len(fake_llm.transcriptions) == 1 and fake_llm.requests == []


async def test_a_long_transcript_is_cut_where_typed_text_is(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech={"stt_model": "whisper-1"})
    fake_llm.script_transcripts("and then " * 250_000)  # 2.25 MB of words
    fake_llm.script(Reply(text="That was a long story"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=VOICE)
    await fake.wait_for_sent(chat_id=ALICE)
    cut = ("and then " * 2000)[:MAX_INBOUND_CHARS] + CUT_NOTE.format(limit=MAX_INBOUND_CHARS)
    [row] = await user_rows(gateway.app.store, ALICE)
    assert row.text == cut
    assert len(request_text(fake_llm.requests[0])) < 2 * MAX_INBOUND_CHARS


async def test_a_long_typed_message_is_cut_alike(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    fake_llm.script(Reply(text="That was a long story"))
    fake.send_user_message(chat_id=ALICE, text="and then " * 5000)
    await fake.wait_for_sent(chat_id=ALICE)
    cut = ("and then " * 2000)[:MAX_INBOUND_CHARS] + CUT_NOTE.format(limit=MAX_INBOUND_CHARS)
    [row] = await user_rows(gateway.app.store, ALICE)
    assert row.text == cut


async def test_a_kept_voice_note_gets_a_short_safe_name_whatever_it_was_called(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(speech={"stt_model": "whisper-1", "keep_audio": True})
    update = fake.message_update(chat_id=ALICE, audio=True, media=b"ID3 a song")
    audio = update["message"]["audio"]
    audio.update(file_name="song." + "x" * 300, mime_type="audio/mpeg")
    fake_llm.script(Reply(text="Nice song"))
    fake.push_update(update)
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert answer.text == "Nice song"
    [heard] = fake_llm.transcriptions
    assert heard.format == "mp3"
    [row] = await user_rows(gateway.app.store, ALICE)
    kept = gateways.data_dir / "partners" / "example" / "audio"
    assert [p.name for p in kept.iterdir()] == [f"{row.id}.mp3"]


@pytest.mark.parametrize(
    ("filename", "mime", "suffix"),
    [
        ("voice.ogg", "audio/ogg", ".ogg"),
        ("Recording.M4A", None, ".m4a"),
        ("song." + "x" * 300, "audio/mpeg", ".mp3"),
        ("../../etc/passwd", None, ".ogg"),
        ("notes.mp3 ; rm -rf", "audio/mpeg", ".mp3"),
        ("clip.wäv", "audio/wav", ".wav"),
        (None, None, ".ogg"),
    ],
)
def test_a_kept_suffix_is_short_and_safe(
    filename: str | None, mime: str | None, suffix: str
) -> None:
    assert kept_suffix(filename, mime) == suffix


# ---- the owner deletes kept voice notes ------------------------------------------------------


async def keep_voice_notes(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> Gateway:
    """Alice's note kept with the example partner, the owner's with the owner's assistant."""
    gateway = await gateways.start(speech={"stt_model": "whisper-1", "keep_audio": True})
    fake_llm.script(Reply(text="Heard, Alice"), Reply(text="Heard, owner"))
    fake.send_user_message(chat_id=ALICE, voice=True, media=make_ogg_opus(1))
    await fake.wait_for_sent(chat_id=ALICE)
    fake.send_user_message(chat_id=OWNER, voice=True, media=make_ogg_opus(2), first_name="Owner")
    await fake.wait_for_sent(lambda c: c.text == "Heard, owner", chat_id=OWNER)
    await settled(fake, gateway)
    return gateway


async def test_admin_voice_forget_of_a_partner_deletes_only_its_kept_notes(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await keep_voice_notes(gateways, fake, fake_llm)
    partner_audio = gateways.data_dir / "partners" / "example" / "audio"
    owner_audio = gateways.data_dir / "audio"
    [alices] = list(partner_audio.iterdir())
    size = alices.stat().st_size
    [owners] = list(owner_audio.iterdir())
    before = len(fake.sent("sendMessage", OWNER))
    fake.send_user_message(chat_id=OWNER, text="/admin voice forget example", first_name="Owner")
    [answer] = (await fake.wait_for_sent(chat_id=OWNER, count=before + 1))[before:]
    assert answer.text == f"Deleted 1 kept voice note ({size:,} bytes) of Mira."
    assert list(partner_audio.iterdir()) == [] and owners.exists()
    [audit] = await gateway.app.store.audit_rows("admin voice forget")
    assert audit["detail"]["args"] == ["example"] and audit["detail"]["outcome"] == "ok"


async def test_admin_voice_forget_without_a_partner_deletes_every_kept_note(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await keep_voice_notes(gateways, fake, fake_llm)
    kept = [
        *(gateways.data_dir / "partners" / "example" / "audio").iterdir(),
        *(gateways.data_dir / "audio").iterdir(),
    ]
    size = sum(path.stat().st_size for path in kept)
    before = len(fake.sent("sendMessage", OWNER))
    fake.send_user_message(chat_id=OWNER, text="/admin voice forget", first_name="Owner")
    [answer] = (await fake.wait_for_sent(chat_id=OWNER, count=before + 1))[before:]
    assert answer.text == f"Deleted 2 kept voice notes ({size:,} bytes)."
    assert not any(path.exists() for path in kept)


async def test_admin_voice_forget_of_an_unknown_partner_says_so(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await keep_voice_notes(gateways, fake, fake_llm)
    before = len(fake.sent("sendMessage", OWNER))
    fake.send_user_message(chat_id=OWNER, text="/admin voice forget nobody", first_name="Owner")
    [answer] = (await fake.wait_for_sent(chat_id=OWNER, count=before + 1))[before:]
    assert "nobody" in (answer.text or "")
    assert len(list((gateways.data_dir / "partners" / "example" / "audio").iterdir())) == 1
