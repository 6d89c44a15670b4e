"""Live previews of a reply while the model writes it (``telegram.stream = true``).

* In a private chat: a *draft* (``sendMessageDraft``, Bot API 9.5) that follows the text at
  most once a second. A draft is an ephemeral ~30 s preview, so the reply itself is still sent
  with ``sendMessage``: :meth:`DraftStream.finish` returns None.
* In a group: one message, sent on the first words and edited at most every 3 s (Telegram
  allows about 20 messages a minute per group, edits included). :meth:`EditStream.finish`
  edits it to the full first chunk, which then counts as delivered.

A preview is a courtesy: when Telegram refuses one, the stream stops previewing and the reply
is delivered the normal way. Previews are plain text; the finished message is formatted.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta

from telegram import Bot
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.warnings import PTBDeprecationWarning

from adapters.telegram_format import MAX_MESSAGE_UTF16, render, utf16_len

logger = logging.getLogger(__name__)

DRAFT_INTERVAL_SECONDS = 1.0
EDIT_INTERVAL_SECONDS = 3.0
FINISH_ATTEMPTS = 3
MAX_FINISH_WAIT_SECONDS = 30.0

SendPreview = Callable[[str], Awaitable[int]]
"""Send a new plain-text message (as a reply, in the right topic); returns its id."""
EditMessage = Callable[[int, str, bool], Awaitable[None]]
"""Edit message ``id`` to ``text``: formatted Markdown (True) or a plain preview (False)."""
DeleteMessage = Callable[[int], Awaitable[None]]
CanPreview = Callable[[], Awaitable[bool]]


def preview_text(markdown: str) -> str:
    """What a preview shows: the text so far without formatting, cut to fit one message."""
    text = render(markdown).plain.strip()
    if utf16_len(text) <= MAX_MESSAGE_UTF16:
        return text
    while utf16_len(text) > MAX_MESSAGE_UTF16 - 1:
        text = text[: -max(1, (utf16_len(text) - MAX_MESSAGE_UTF16) // 2 + 1)]
    return text + "…"


def retry_after_seconds(exc: RetryAfter) -> float:
    """Telegram's retry-after, whether PTB gives it as int seconds or a timedelta."""
    with warnings.catch_warnings():
        # PTB 22 warns that the int form will become a timedelta: both are handled here.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


class DraftStream:
    """The reply as a draft in a private chat."""

    def __init__(self, bot: Bot, chat_id: int, draft_id: int) -> None:
        self._bot = bot
        self._chat_id = chat_id
        self._draft_id = draft_id
        self._next_at = 0.0
        self._stopped = False
        self.drafts_sent = 0

    async def push(self, text: str) -> None:
        now = time.monotonic()
        if self._stopped or now < self._next_at:
            return
        preview = preview_text(text)
        if not preview:
            return
        self._next_at = now + DRAFT_INTERVAL_SECONDS
        try:
            await self._bot.send_message_draft(self._chat_id, self._draft_id, preview)
            self.drafts_sent += 1
        except RetryAfter as exc:
            self._next_at = now + retry_after_seconds(exc)
        except TelegramError as exc:
            logger.info("draft preview in %s stopped: %s", self._chat_id, exc)
            self._stopped = True

    async def finish(self, first_chunk: str) -> str | None:
        del first_chunk  # a draft is only a preview: the reply is sent as a message
        return None


class EditStream:
    """The reply as one message in a group, edited while the model writes."""

    def __init__(
        self,
        send_preview: SendPreview,
        edit: EditMessage,
        delete: DeleteMessage,
        can_preview: CanPreview,
    ) -> None:
        self._send_preview = send_preview
        self._edit = edit
        self._delete = delete
        self._can_preview = can_preview
        self._message_id: int | None = None
        self._checked = False
        self._stopped = False
        self._next_at = 0.0
        self._shown = ""
        self.edits = 0

    async def push(self, text: str) -> None:
        if not self._checked:
            self._checked = True
            self._stopped = not await self._can_preview()
        now = time.monotonic()
        if self._stopped or now < self._next_at:
            return
        preview = preview_text(text)
        if not preview or preview == self._shown:
            return
        self._next_at = now + EDIT_INTERVAL_SECONDS
        try:
            if self._message_id is None:
                self._message_id = await self._send_preview(preview)
            else:
                await self._edit(self._message_id, preview, False)
                self.edits += 1
            self._shown = preview
        except RetryAfter as exc:
            self._next_at = now + retry_after_seconds(exc)
        except TelegramError as exc:
            logger.info("streamed preview stopped: %s", exc)
            self._stopped = True

    async def finish(self, first_chunk: str) -> str | None:
        """Show ``first_chunk`` formatted in the preview message and hand over its id."""
        if self._message_id is None:
            return None
        for attempt in range(1, FINISH_ATTEMPTS + 1):
            try:
                await self._edit(self._message_id, first_chunk, True)
                self.edits += 1
                return str(self._message_id)
            except BadRequest as exc:
                if "not modified" in exc.message.lower():
                    return str(self._message_id)
                logger.warning("could not finish the streamed message: %s", exc)
                break
            except RetryAfter as exc:
                if attempt < FINISH_ATTEMPTS:
                    await asyncio.sleep(min(retry_after_seconds(exc), MAX_FINISH_WAIT_SECONDS))
            except TelegramError as exc:
                logger.warning("could not finish the streamed message: %s", exc)
                if attempt < FINISH_ATTEMPTS:
                    await asyncio.sleep(attempt)
        # The preview stays partial: remove it so the reply, sent normally, is not shown twice.
        try:
            await self._delete(self._message_id)
        except TelegramError as exc:
            logger.info("could not delete the unfinished preview: %s", exc)
        return None
