"""The fakes' speech, image, file, voice and reaction parts, driven by the real clients
(openai, python-telegram-bot, discord.py): they accept what the real services accept and
refuse what those refuse."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import discord
import openai
import pytest
from telegram import Bot, ReactionTypeEmoji
from telegram.error import BadRequest

from tests.fakes.fake_discord import FakeDiscord, point_discord_at
from tests.fakes.fake_llm import Cut, Failure, FakeLLM, Malformed
from tests.fakes.fake_telegram import TOKEN, FakeTelegram
from tests.fakes.ogg_opus import NotOggOpus, make_ogg_opus, ogg_opus_seconds
from tests.test_fake_discord import CHANNEL, GUILD, RecordingClient, running

PNG = b"\x89PNG\r\n\x1a\n fake image"


def test_ogg_opus_files_are_read_back_with_their_length() -> None:
    data = make_ogg_opus(2.5)
    assert ogg_opus_seconds(data) == pytest.approx(2.5, abs=0.02)
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 0xFF
    with pytest.raises(NotOggOpus):
        ogg_opus_seconds(bytes(damaged))
    with pytest.raises(NotOggOpus):
        ogg_opus_seconds(b"ID3 an mp3")


@pytest.fixture
async def client(fake_llm: FakeLLM) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=fake_llm.base_url, api_key="x", max_retries=0)
    yield client
    await client.close()


async def test_transcription_answers_the_script_and_records_the_audio(
    fake_llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    fake_llm.script_transcripts("first words")
    audio = make_ogg_opus(1)
    result = await client.audio.transcriptions.create(
        model="whisper-1", file=("voice.ogg", audio, "audio/ogg")
    )
    assert result.text == "first words"
    [request] = fake_llm.transcriptions
    assert (request.model, request.format, request.data) == ("whisper-1", "ogg", audio)


async def test_transcription_refuses_an_unknown_format_and_scripted_failures(
    fake_llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    with pytest.raises(openai.BadRequestError, match="Invalid file format"):
        await client.audio.transcriptions.create(model="m", file=("notes.txt", b"hi", "text/plain"))
    fake_llm.script_transcripts(Failure(500, "whisper crashed"))
    with pytest.raises(openai.InternalServerError):
        await client.audio.transcriptions.create(model="m", file=("v.ogg", b"OggS", "audio/ogg"))


async def test_transcription_answers_a_scripted_body_as_it_is_or_cut_off(
    fake_llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    fake_llm.script_transcripts(Malformed('{"text": "cut he'), Cut(b'{"text": "whole"}', 5))
    upload = ("v.ogg", b"OggS", "audio/ogg")
    with pytest.raises(ValueError, match="Unterminated string"):  # the SDK's JSONDecodeError
        await client.audio.transcriptions.create(model="m", file=upload)
    with pytest.raises(openai.APIConnectionError):
        await client.audio.transcriptions.create(model="m", file=upload)
    assert len(fake_llm.transcriptions) == 2


async def test_speech_answers_ogg_opus_and_records_the_text(
    fake_llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    response = await client.audio.speech.create(
        model="tts-1", voice="alloy", input="hello there", response_format="opus"
    )
    assert ogg_opus_seconds(response.content) > 0
    assert [s.input for s in fake_llm.speeches] == ["hello there"]
    with pytest.raises(openai.BadRequestError):
        await client.audio.speech.create(
            model="tts-1", voice="alloy", input="x" * 4097, response_format="opus"
        )


async def test_image_parts_are_recorded_and_non_images_refused(
    fake_llm: FakeLLM, client: openai.AsyncOpenAI
) -> None:
    def message(data: bytes) -> list[dict]:
        url = "data:image/png;base64," + base64.b64encode(data).decode()
        part = {"type": "image_url", "image_url": {"url": url}}
        return [{"role": "user", "content": [{"type": "text", "text": "look"}, part]}]

    await client.chat.completions.create(model="m", messages=message(PNG))  # type: ignore[arg-type]
    assert [p.data for p in fake_llm.image_parts] == [PNG]
    with pytest.raises(openai.BadRequestError, match="Invalid image"):
        await client.chat.completions.create(model="m", messages=message(b"text"))  # type: ignore[arg-type]


@pytest.fixture
async def telegram() -> AsyncIterator[tuple[FakeTelegram, Bot]]:
    async with FakeTelegram() as fake:
        bot = Bot(TOKEN, base_url=fake.base_url, base_file_url=fake.base_file_url)
        async with bot:
            yield fake, bot


async def test_telegram_voice_note_downloads_and_big_files_are_refused(
    telegram: tuple[FakeTelegram, Bot],
) -> None:
    fake, bot = telegram
    update = fake.message_update(chat_id=7, voice=True, media=b"OggS voice", duration=9)
    voice = update["message"]["voice"]
    assert voice["duration"] == 9
    file = await bot.get_file(voice["file_id"])
    assert bytes(await file.download_as_bytearray()) == b"OggS voice"
    big = fake.message_update(chat_id=7, voice=True, file_size=21 * 1024 * 1024)
    with pytest.raises(BadRequest, match="(?i)file is too big"):
        await bot.get_file(big["message"]["voice"]["file_id"])


async def test_telegram_send_voice_takes_only_ogg_opus(
    telegram: tuple[FakeTelegram, Bot],
) -> None:
    fake, bot = telegram
    sent = await bot.send_voice(7, make_ogg_opus(3), caption="hi")
    assert sent.voice is not None and sent.voice.file_size == len(make_ogg_opus(3))
    with pytest.raises(BadRequest, match="(?i)ogg/opus"):
        await bot.send_voice(7, b"ID3 an mp3 file")
    assert len(fake.sent("sendVoice")) == 1


async def test_telegram_reactions_only_with_allowed_emoji(
    telegram: tuple[FakeTelegram, Bot],
) -> None:
    fake, bot = telegram
    message = await bot.send_message(7, "hi")
    await bot.set_message_reaction(7, message.message_id, ReactionTypeEmoji("❤"))
    assert fake.reactions[(7, message.message_id)][0]["emoji"] == "❤"
    with pytest.raises(BadRequest, match="(?i)reaction_invalid"):
        await bot.set_message_reaction(7, message.message_id, ReactionTypeEmoji("🐱"))
    update = fake.reaction_update(chat_id=7, message_id=message.message_id, emoji="👍")
    assert update["message_reaction"]["new_reaction"] == [{"type": "emoji", "emoji": "👍"}]


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as fake:
        fake.add_guild(GUILD, "Test Guild")
        fake.add_text_channel(GUILD, CHANNEL, "general")
        fake.add_user(5, "alice")
        restore = point_discord_at(fake)
        try:
            yield fake
        finally:
            restore()


async def test_discord_voice_message_flag_and_reactions(discord_fake: FakeDiscord) -> None:
    intents = discord.Intents.default()
    intents.message_content = True
    async with running(RecordingClient(intents=intents)) as client:
        await discord_fake.dm_message(
            user_id=5,
            content="",
            flags=1 << 13,
            attachments=[
                {"filename": "voice-message.ogg", "data": b"OggS", "duration_secs": 4.5,
                 "waveform": "AAAA"}
            ],
        )  # fmt: skip
        message = await client.wait_message(lambda m: bool(m.attachments))
        assert message.flags.voice
        assert message.attachments[0].is_voice_message()
        assert message.attachments[0].duration == 4.5
        posted = await client.get_channel(CHANNEL).send("hello")  # type: ignore[union-attr]
        await posted.add_reaction("❤️")
        with pytest.raises(discord.HTTPException) as unknown:
            await posted.add_reaction("heart")
        assert unknown.value.code == 10014
