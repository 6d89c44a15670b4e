"""Replies spoken as a voice bubble: whether a reply is spoken, and its audio.

Per user ``/voice on|off|auto`` (users.voice_mode); ``auto``, the default when
``speech.tts_model`` is set, speaks a reply when the user spoke. The text stays the source of
truth: delivery sends it as the voice message's caption, or after it when it is too long, and
sends text alone when speaking fails. Only :func:`bot.services.speech.speakable` text is spoken — no
code, links, markup or markers. Nothing of the audio is kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bot.services.speech import SpeechClient, SpeechError, speakable
from bot.store import Store

logger = logging.getLogger(__name__)

MODES = ("on", "off", "auto")
AUTO = "auto"
OWNER = "owner"


class VoiceReplies:
    def __init__(
        self,
        speech: SpeechClient,
        store: Store,
        voice_of: Callable[[str | None], str | None],
        usage_day: Callable[[float], str],
    ) -> None:
        self.speech = speech
        self.store = store
        self.voice_of = voice_of
        """A partner id -> its preset.yml ``voice:`` (None: ``speech.voice``)."""
        self.usage_day = usage_day

    @property
    def enabled(self) -> bool:
        return self.speech.can_speak

    async def wanted(self, user_key: str, user_spoke: bool) -> bool:
        """Whether this user's next reply is spoken (see the module docstring)."""
        if not self.enabled:
            return False
        mode = await self.store.voice_mode(user_key) or AUTO
        return mode == "on" or (mode == AUTO and user_spoke)

    async def audio(self, text: str, partner_id: str | None) -> bytes | None:
        """The reply spoken, or None when there is nothing to speak or speaking failed (the
        reply then goes out as text; the failure is logged)."""
        spoken = speakable(text)
        if not spoken:
            return None
        try:
            audio = await self.speech.synthesize(spoken, self.voice_of(partner_id))
        except SpeechError as exc:
            logger.warning("reply not spoken, sent as text: %s", exc)
            return None
        await self.store.add_units(
            self.usage_day(time.time()),
            partner_id or OWNER,
            "speech",
            self.speech.config.tts_model or "",
            len(spoken),
        )
        return audio
