"""Telegram's media for the gateway: file downloads, voice bubbles, stickers and reactions.

* Downloads go through ``getFile`` (bots may fetch files up to 20 MB; over that Telegram
  refuses, which becomes :class:`~adapters.base.MediaTooBig`).
* A voice reply is ``sendVoice`` with OGG/Opus audio, so Telegram shows a real voice bubble;
  its caption is the reply's text, formatted like a message (plain text if Telegram refuses
  the formatting).
* Reactions are ``setMessageReaction`` with one of the emoji Telegram allows for bots; any
  other emoji is refused here, before a request is made.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import Bot, ReactionTypeEmoji
from telegram.constants import ChatAction, ParseMode, ReactionEmoji
from telegram.error import BadRequest, TelegramError

from adapters.base import DeliveryError, MediaTooBig
from adapters.telegram_format import render
from bot.events import ChatRef

logger = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024
"""What the Bot API lets a bot download."""
MAX_CAPTION_UTF16 = 1024
VOICE_FILENAME = "reply.ogg"
ALLOWED_REACTIONS = frozenset(str(emoji.value) for emoji in ReactionEmoji)
VARIATION_SELECTOR = "\ufe0f"


def reaction_emoji(emoji: str) -> str | None:
    """``emoji`` as Telegram lists it among the allowed reactions, or None if it is not
    there (models write ❤️ with a variation selector; Telegram lists ❤ without)."""
    for candidate in (emoji, emoji.replace(VARIATION_SELECTOR, "")):
        if candidate in ALLOWED_REACTIONS:
            return candidate
    return None


class TelegramMedia:
    """The media calls of one bot; every error is the gateway's own (DeliveryError, ...)."""

    def __init__(self, bot: Bot, error: Any) -> None:
        self.bot = bot
        self._error = error
        """PTB's errors as DeliveryError (``telegram_sending.delivery_error``)."""

    async def download(self, file_id: str) -> bytes:
        try:
            file = await self.bot.get_file(file_id)
            if (file.file_size or 0) > MAX_DOWNLOAD_BYTES:
                raise MediaTooBig(f"{file.file_size} bytes; bots may fetch 20 MB")
            return bytes(await file.download_as_bytearray())
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise MediaTooBig(exc.message) from exc
            raise self._error(exc) from exc
        except TelegramError as exc:
            raise self._error(exc) from exc

    async def send_voice(
        self, chat_id: int, audio: bytes, caption: str, where: dict[str, Any]
    ) -> str:
        rendered = render(caption) if caption else None
        try:
            try:
                sent = await self.bot.send_voice(
                    chat_id,
                    audio,
                    caption=rendered.html if rendered else None,
                    parse_mode=ParseMode.HTML if rendered else None,
                    filename=VOICE_FILENAME,
                    **where,
                )
            except BadRequest as exc:
                if rendered is None or "entit" not in exc.message.lower():
                    raise
                logger.warning("telegram refused the caption's formatting (%s); plain", exc)
                sent = await self.bot.send_voice(
                    chat_id, audio, caption=rendered.plain, filename=VOICE_FILENAME, **where
                )
        except TelegramError as exc:
            raise self._error(exc) from exc
        return str(sent.message_id)

    async def react(self, chat: ChatRef, message_id: str, emoji: str) -> None:
        allowed = reaction_emoji(emoji)
        if allowed is None or not message_id.isdigit():
            raise DeliveryError(f"Telegram does not allow {emoji!r} as a reaction", retryable=False)
        try:
            await self.bot.set_message_reaction(
                int(chat.chat_id), int(message_id), ReactionTypeEmoji(allowed)
            )
        except TelegramError as exc:
            raise self._error(exc) from exc

    async def send_sticker(self, chat_id: int, sticker: str, where: dict[str, Any]) -> str:
        try:
            sent = await self.bot.send_sticker(chat_id, sticker, **where)
        except TelegramError as exc:
            raise self._error(exc) from exc
        return str(sent.message_id)

    async def recording(self, chat: ChatRef) -> None:
        thread = int(chat.thread_id) if chat.thread_id else None
        try:
            await self.bot.send_chat_action(
                int(chat.chat_id), ChatAction.RECORD_VOICE, message_thread_id=thread
            )
        except TelegramError as exc:
            raise self._error(exc) from exc
