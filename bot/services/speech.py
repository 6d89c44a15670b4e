"""The OpenAI-compatible speech client: voice notes to text, reply text to a voice bubble.

``[speech]`` points it at any OpenAI-compatible server — OpenAI itself, faster-whisper or
speaches, a whisper.cpp server, Kokoro-FastAPI, LocalAI — and defaults to the ``[llm]``
endpoint and key. Transcription is ``audio.transcriptions`` (``stt_model``), speech is
``audio.speech`` (``tts_model``, the partner's ``voice:``, Opus). Every failure of the
endpoint becomes :class:`SpeechError` here — the SDK's exceptions, and an answer cut short or
not UTF-8 (the SDK lets its JSON and codec errors through) — so a voice note the endpoint
failed on takes the path of one nobody could transcribe, and nothing past this module knows
the SDK.

:func:`speakable` is what may be read aloud of a reply: never code, links or markup.
"""

from __future__ import annotations

import logging
import re
from typing import Final, Literal

import openai

from bot.config.services import LLMConfig, SpeechConfig
from bot.text import markers

logger = logging.getLogger(__name__)

NO_KEY = "not-set"
SPEECH_FORMAT: Final[Literal["opus"]] = "opus"
MAX_SPEECH_CHARS = 4096
"""OpenAI's limit for one speech request; longer replies are spoken up to it."""

CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
URL = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
MARKUP = re.compile(r"(?m)^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+|\d+[.)]\s+)|[*_~|]+|<[^>\n]+>")
SPACES = re.compile(r"[ \t]+")
BLANK_LINES = re.compile(r"\n{3,}")
ENDPOINT_ERRORS = (openai.OpenAIError, ValueError)
"""The SDK's errors, and ValueError: a body cut short or not JSON (JSONDecodeError), or not
UTF-8 (UnicodeDecodeError)."""


class SpeechError(Exception):
    """The speech endpoint could not transcribe or speak (down, refused, misconfigured)."""


def speakable(text: str) -> str:
    """What may be read aloud of a reply: code blocks, inline code, links' addresses, bare
    URLs, Markdown/HTML markup and reply markers are left out; a link keeps its words."""
    text = CODE_BLOCK.sub(" ", markers.strip(text))
    text = INLINE_CODE.sub(" ", text)
    text = LINK.sub(r"\1", text)
    text = URL.sub(" ", text)
    text = MARKUP.sub("", text)
    text = SPACES.sub(" ", text)
    lines = (line.strip() for line in text.splitlines())
    return BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()[:MAX_SPEECH_CHARS]


class SpeechClient:
    """Transcribes and speaks through one OpenAI-compatible endpoint."""

    def __init__(self, config: SpeechConfig, llm: LLMConfig) -> None:
        self.config = config
        key = config.api_key or llm.api_key
        self._client = openai.AsyncOpenAI(
            base_url=config.base_url or llm.base_url,
            api_key=key.get_secret_value() if key else NO_KEY,
            timeout=config.timeout,
            max_retries=1,
        )

    @property
    def can_transcribe(self) -> bool:
        return bool(self.config.stt_model)

    @property
    def can_speak(self) -> bool:
        return bool(self.config.tts_model)

    async def close(self) -> None:
        await self._client.close()

    async def transcribe(self, audio: bytes, filename: str, mime: str | None) -> str:
        """The words of a voice note; raises SpeechError."""
        if not self.config.stt_model:
            raise SpeechError("speech.stt_model is not set")
        try:
            result = await self._client.audio.transcriptions.create(
                model=self.config.stt_model,
                file=(filename, audio, mime or "application/octet-stream"),
            )
        except ENDPOINT_ERRORS as exc:
            raise SpeechError(f"transcription failed: {exc}") from exc
        text = getattr(result, "text", None)
        if not isinstance(text, str):
            raise SpeechError("the transcription endpoint answered without text")
        return text.strip()

    async def synthesize(self, text: str, voice: str | None) -> bytes:
        """``text`` spoken as OGG/Opus; raises SpeechError."""
        if not self.config.tts_model:
            raise SpeechError("speech.tts_model is not set")
        try:
            response = await self._client.audio.speech.create(
                model=self.config.tts_model,
                voice=voice or self.config.voice,
                input=text[:MAX_SPEECH_CHARS],
                response_format=SPEECH_FORMAT,
            )
        except ENDPOINT_ERRORS as exc:
            raise SpeechError(f"speech failed: {exc}") from exc
        audio = response.content
        if not audio.startswith(b"OggS"):
            raise SpeechError("the speech endpoint did not answer OGG/Opus audio")
        return audio
