"""One message put to Telegram by a given bot: Telegram HTML with plain text when Telegram
refuses the entities (sends and edits alike), its place (a forum topic; in groups, a quote of
the message it answers), its buttons, and python-telegram-bot's errors as the gateway's
:class:`~adapters.base.DeliveryError`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)

from adapters.base import DeliveryError
from adapters.telegram_format import Rendered, render
from adapters.telegram_streams import retry_after_seconds
from bot.events import ChatRef, Choice

logger = logging.getLogger(__name__)

GENERAL_TOPIC = "1"
MAX_CALLBACK_DATA_BYTES = 64


async def send_formatted(
    bot: Bot,
    chat: ChatRef,
    rendered: Rendered,
    reply_to: str | None,
    markup: InlineKeyboardMarkup | None,
) -> Message:
    where = placement(chat, reply_to)
    try:
        return await bot.send_message(
            int(chat.chat_id),
            rendered.html,
            parse_mode=ParseMode.HTML,
            reply_markup=markup,
            **where,
        )
    except BadRequest as exc:
        if not is_markup_error(exc):
            raise
        logger.warning("telegram refused the formatting (%s); sending plain text", exc)
    return await bot.send_message(int(chat.chat_id), rendered.plain, reply_markup=markup, **where)


async def edit_formatted(
    bot: Bot, chat: ChatRef, message_id: int, text: str, formatted: bool
) -> None:
    """Edit a message ``bot`` sent (no other bot may) to ``text``: formatted Markdown, or a
    plain preview (``formatted`` False)."""
    if not formatted:
        await bot.edit_message_text(text, int(chat.chat_id), message_id)
        return
    rendered = render(text)
    try:
        await bot.edit_message_text(
            rendered.html, int(chat.chat_id), message_id, parse_mode=ParseMode.HTML
        )
    except BadRequest as exc:
        if not is_markup_error(exc):
            raise
        logger.warning("telegram refused the formatting (%s); editing as plain text", exc)
        await bot.edit_message_text(rendered.plain, int(chat.chat_id), message_id)


def placement(chat: ChatRef, reply_to: str | None) -> dict[str, Any]:
    """Topic and quote for a send: forum topics keep their thread (the General topic, id 1,
    must be left out), and in groups the reply quotes the message it answers."""
    where: dict[str, Any] = {}
    if chat.thread_id and chat.thread_id != GENERAL_TOPIC:
        where["message_thread_id"] = int(chat.thread_id)
    if not chat.is_dm and reply_to and reply_to.isdigit():
        where["reply_parameters"] = ReplyParameters(int(reply_to), allow_sending_without_reply=True)
    return where


def keyboard(choices: Sequence[Choice]) -> InlineKeyboardMarkup | None:
    """One button per row; a command too long for callback_data (64 bytes) gets no button."""
    rows = [
        [InlineKeyboardButton(choice.label, callback_data=choice.command)]
        for choice in choices
        if len(choice.command.encode()) <= MAX_CALLBACK_DATA_BYTES
    ]
    return InlineKeyboardMarkup(rows) if rows else None


def is_markup_error(exc: BadRequest) -> bool:
    text = exc.message.lower()
    return "entit" in text or "parse" in text or "tag" in text


def delivery_error(exc: TelegramError) -> DeliveryError:
    """PTB's errors as the gateway's: whether and when trying again may help."""
    if isinstance(exc, RetryAfter):
        seconds = retry_after_seconds(exc)
        return DeliveryError(f"flood wait {seconds:.0f} s", retryable=True, retry_after=seconds)
    if isinstance(exc, InvalidToken):
        return DeliveryError("the bot token was rejected", retryable=False)  # PTB quotes it
    if isinstance(exc, Forbidden):
        # the user blocked the bot (or never started it): no one can write to them now
        return DeliveryError(exc.message, retryable=False, unreachable=True)
    if isinstance(exc, BadRequest | ChatMigrated):
        # blocked by the user, removed from the group, a refused message: trying again won't help
        return DeliveryError(exc.message, retryable=False)
    if isinstance(exc, NetworkError):  # TimedOut included; BadRequest was caught above
        return DeliveryError(exc.message, retryable=True)
    return DeliveryError(exc.message, retryable=False)
