"""A Discord reply shown while the model writes it (DMs only: in servers a partner speaks
through a persona webhook, whose name a preview started before the reply could not carry)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import discord

from adapters.discord_delivery import MAX_MESSAGE_CHARS, NO_PINGS
from bot.text.utf16 import utf16_len

logger = logging.getLogger(__name__)

PREVIEW_INTERVAL_SECONDS = 1.0


def preview_text(text: str) -> str:
    """What a live preview shows: the text so far, cut to fit one message."""
    text = text.strip()
    if utf16_len(text) <= MAX_MESSAGE_CHARS:
        return text
    while utf16_len(text) > MAX_MESSAGE_CHARS - 1:
        text = text[: -max(1, (utf16_len(text) - MAX_MESSAGE_CHARS) // 2 + 1)]
    return text + "…"


class EditStream:
    """A reply shown while the model writes it: one message, sent on the first words and then
    edited at most once every :data:`PREVIEW_INTERVAL_SECONDS`."""

    def __init__(self, post: Callable[[str], Awaitable[discord.Message]]) -> None:
        self._post = post
        self._message: discord.Message | None = None
        self._shown = ""
        self._next_at = 0.0
        self._stopped = False
        self.edits = 0

    async def push(self, text: str) -> None:
        now = time.monotonic()
        if self._stopped or now < self._next_at:
            return
        preview = preview_text(text)
        if not preview or preview == self._shown:
            return
        self._next_at = now + PREVIEW_INTERVAL_SECONDS
        try:
            if self._message is None:
                self._message = await self._post(preview)
            else:
                await self._message.edit(content=preview, allowed_mentions=NO_PINGS)
                self.edits += 1
            self._shown = preview
        except discord.RateLimited as exc:
            self._next_at = now + exc.retry_after
        except discord.HTTPException as exc:
            logger.info("discord: streamed preview stopped: %s", exc)
            self._stopped = True

    async def finish(self, first_chunk: str) -> str | None:
        """Show ``first_chunk`` in the preview message and hand over its id."""
        if self._message is None:
            return None
        try:
            if first_chunk != self._shown:
                await self._message.edit(content=first_chunk, allowed_mentions=NO_PINGS)
                self.edits += 1
            return str(self._message.id)
        except discord.HTTPException as exc:
            logger.warning("discord: could not finish the streamed message: %s", exc)
        # The preview stays partial: remove it so the reply, sent normally, is not shown twice.
        try:
            await self._message.delete()
        except discord.HTTPException as exc:
            logger.info("discord: could not delete the unfinished preview: %s", exc)
        return None
