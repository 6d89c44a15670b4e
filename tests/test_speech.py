"""Voice notes at the edges: every failure of the speech endpoint is a SpeechError, so a note
whose transcription broke gets the "write it for me" line rather than the generic apology.
The real openai and python-telegram-bot clients against the fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.config import LLMConfig, SpeechConfig
from bot.quiet_turns import VOICE_UNHEARD
from bot.speech import SpeechClient, SpeechError
from tests.fakes.fake_llm import Cut, FakeLLM, Malformed
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    TelegramGateways,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)
from tests.test_telegram_media import ALICE, SPEECH, VOICE

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
