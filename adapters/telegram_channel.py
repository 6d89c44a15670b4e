"""The Telegram channel: python-telegram-bot's Bot driven by the gateway's own update loop.

Updates come in by long polling (default) or by webhook (``telegram.mode = "webhook"``), each
confirmed to Telegram only after the gateway has stored it: that is
``adapters/telegram_receiving.py``. python-telegram-bot's own Updater and webhook server
acknowledge before the handler has run, so neither is used. Long polling and the command menu
are the leader's (:meth:`TelegramChannel.lead`): with several workers on one database one of
them polls, while a webhook is served by every worker.

Sending turns the model's Markdown into Telegram HTML (``adapters/telegram_format.py``), falls
back to plain text if Telegram refuses the entities, quotes the answered message in groups,
keeps forum topics apart, and maps PTB's errors to :class:`~adapters.base.DeliveryError`.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import logging
import time
from collections.abc import Sequence
from typing import Any

from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
)
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.ext import AIORateLimiter, ExtBot

from adapters.base import DeliveryError, Receiver, ReplyStream
from adapters.telegram_format import Rendered, render
from adapters.telegram_format import split as split_markdown
from adapters.telegram_media import MAX_CAPTION_UTF16, MAX_DOWNLOAD_BYTES, TelegramMedia
from adapters.telegram_menu import set_menus, show_owner_menu
from adapters.telegram_poll_client import PollClient
from adapters.telegram_receiving import TelegramReceiving
from adapters.telegram_send_request import SendRequest
from adapters.telegram_streams import DraftStream, EditStream, retry_after_seconds
from adapters.telegram_updates import PLATFORM, BotIdentity
from adapters.telegram_webhook import WebhookServer
from bot.config.model import ConfigError
from bot.config.platforms import TelegramConfig
from bot.events import ChannelView, ChatRef, Choice, Outbound

logger = logging.getLogger(__name__)

GENERAL_TOPIC = "1"
MAX_CALLBACK_DATA_BYTES = 64
SEND_POOL_SIZE = 32
POOL_TIMEOUT_SECONDS = 10.0
_draft_ids = itertools.count(1)


class TelegramChannel(TelegramReceiving):
    platform = PLATFORM
    caption_limit = MAX_CAPTION_UTF16
    max_download_bytes = MAX_DOWNLOAD_BYTES

    def __init__(self, config: TelegramConfig, owner_ids: Sequence[int] = ()) -> None:
        if config.token is None:
            raise ConfigError("telegram.token is not set; add the token from @BotFather")
        self.config = config
        self.owner_ids = list(owner_ids)
        # Built now (no I/O) because replies left over from a crash are re-delivered before
        # the channels start: send() must work from the first moment.
        self.bot = _build_bot(config)
        self.media = TelegramMedia(self.bot, delivery_error)
        self.receiver: Receiver | None = None
        self.view = ChannelView()
        """What the gateway last told this channel (owners, groups with several partners)."""
        self.me: BotIdentity | None = None
        self.watchdog_restarts = 0
        self._stopping = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self._offset: int | None = None
        self._webhook: WebhookServer | None = None
        self._last_poll_at: float | None = None
        self._not_storing = False
        self._poll_client: PollClient | None = None
        self._poll_failure: tuple[float, str] | None = None

    @property
    def connected(self) -> bool:
        """Webhook: the listener runs. Polling: a getUpdates succeeded within the watchdog's
        time (a healthy long poll answers at least every ``poll_timeout_seconds``); a worker
        that does not lead polls nothing and is connected once it knows the bot."""
        if self.config.mode == "webhook":
            return self._webhook is not None
        if self._poller is None:
            return self.me is not None
        last = self._last_poll_at
        return last is not None and time.monotonic() - last < self.config.watchdog_seconds

    # ---- lifecycle -------------------------------------------------------------------

    def set_view(self, view: ChannelView) -> None:
        self.view = view

    async def start(self, receiver: Receiver) -> None:
        self.receiver = receiver
        await self._initialize()
        me = self.bot.bot
        self.me = BotIdentity(me.id, me.username or "")
        receiver.note_bot_identity(PLATFORM, me.username, me.can_read_all_group_messages)
        self._stopping.clear()
        if self.config.mode == "webhook":  # every worker stores what is posted to it
            await self._start_webhook()
        logger.info("telegram: @%s connected (%s)", me.username, self.config.mode)

    async def lead(self) -> None:
        """The leader sets the command menu and, in polling mode, is the one poller: on a
        client of its own, fresh each time this worker becomes leader."""
        await self._set_commands()
        if self.config.mode == "polling" and self._poller is None:
            await self.bot.delete_webhook()
            self._stopping.clear()
            self._last_poll_at = None
            await self._drop_poll_client()
            self._poller = asyncio.create_task(self._poll_loop(), name="telegram polling")
            logger.info("telegram: polling (this worker leads)")

    async def follow(self) -> None:
        """Stop polling, confirming what was stored, so the next leader starts after it."""
        await self._stop_polling()

    async def _stop_polling(self) -> None:
        self._stopping.set()
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller
            await self._confirm_offset()
        await self._drop_poll_client()

    async def _initialize(self) -> None:
        try:
            await self.bot.initialize()
        except InvalidToken:
            # PTB's message quotes the token: say it without it (and without chaining).
            raise ConfigError(
                "telegram.token was rejected by Telegram; copy it again from @BotFather"
            ) from None
        except NetworkError as exc:
            where = self.config.base_url or "api.telegram.org"
            raise ConfigError(
                f"cannot reach the Telegram Bot API at {where} ({exc.message}); check the "
                "network, or telegram.base_url for a self-hosted Bot API server"
            ) from None

    async def stop(self) -> None:
        await self._stop_polling()
        server, self._webhook = self._webhook, None
        if server is not None:
            await server.stop()
        await self.bot.shutdown()

    async def _set_commands(self) -> None:
        """The command menu: user commands for everyone, /admin too in the owners' chats
        (config.toml's owners and those who claimed the bot, as the gateway's view says)."""
        owners = [int(i) for i in self.view.owners if i.lstrip("-").isdigit()]
        await set_menus(self.bot, dict.fromkeys([*self.owner_ids, *owners]))

    async def show_owner_commands(self, user_id: str) -> None:
        """A new owner (a claim) sees /admin in the menu of their chat with the bot."""
        await show_owner_menu(self.bot, int(user_id))

    # ---- sending ---------------------------------------------------------------------

    def split(self, text: str) -> list[str]:
        return split_markdown(text) or [text]

    async def send(self, message: Outbound) -> str | None:
        rendered = render(message.text)
        if not rendered.plain.strip():
            rendered = Rendered(html.escape(message.text), message.text)
        if message.partner_name and self._several_partners(message.chat):
            name = message.partner_name
            rendered = Rendered(
                f"<b>{html.escape(name)}</b>: {rendered.html}", f"{name}: {rendered.plain}"
            )
        try:
            await self.bot.initialize()
            sent = await self._send_formatted(
                message.chat, rendered, message.reply_to_message_id, _keyboard(message.choices)
            )
        except TelegramError as exc:
            raise delivery_error(exc) from exc
        return str(sent.message_id)

    async def _send_formatted(
        self,
        chat: ChatRef,
        rendered: Rendered,
        reply_to: str | None,
        markup: InlineKeyboardMarkup | None,
    ) -> Message:
        where = _placement(chat, reply_to)
        try:
            return await self.bot.send_message(
                int(chat.chat_id),
                rendered.html,
                parse_mode=ParseMode.HTML,
                reply_markup=markup,
                **where,
            )
        except BadRequest as exc:
            if not _is_markup_error(exc):
                raise
            logger.warning("telegram refused the formatting (%s); sending plain text", exc)
        return await self.bot.send_message(
            int(chat.chat_id), rendered.plain, reply_markup=markup, **where
        )

    def _several_partners(self, chat: ChatRef) -> bool:
        """A group with more than one partner bound: each reply says who is speaking."""
        return not chat.is_dm and chat.chat_id in self.view.shared_chats

    async def send_file(
        self, chat: ChatRef, filename: str, data: bytes, caption: str
    ) -> str | None:
        try:
            await self.bot.initialize()
            sent = await self.bot.send_document(
                int(chat.chat_id),
                data,
                filename=filename,
                caption=caption[:1024],
                **_placement(chat, None),
            )
        except TelegramError as exc:
            raise delivery_error(exc) from exc
        return str(sent.message_id)

    async def typing(self, chat: ChatRef) -> None:
        # sendChatAction needs the topic even for the General topic (id 1)
        thread = int(chat.thread_id) if chat.thread_id else None
        try:
            await self.bot.send_chat_action(
                int(chat.chat_id), ChatAction.TYPING, message_thread_id=thread
            )
        except TelegramError as exc:
            raise delivery_error(exc) from exc

    # ---- media (adapters/telegram_media.py) --------------------------------------------

    async def download(self, ref: str) -> bytes:
        await self.bot.initialize()
        return await self.media.download(ref)

    async def send_voice(self, message: Outbound, audio: bytes) -> str | None:
        await self.bot.initialize()
        where = _placement(message.chat, message.reply_to_message_id)
        return await self.media.send_voice(int(message.chat.chat_id), audio, message.text, where)

    async def send_photo(self, message: Outbound, photo: bytes) -> str | None:
        rendered = render(message.text)
        try:
            await self.bot.initialize()
            sent = await self.bot.send_photo(
                int(message.chat.chat_id),
                photo,
                caption=rendered.html,
                parse_mode=ParseMode.HTML,
                reply_markup=_keyboard(message.choices),
                **_placement(message.chat, message.reply_to_message_id),
            )
        except TelegramError as exc:
            raise delivery_error(exc) from exc
        return str(sent.message_id)

    async def react(self, chat: ChatRef, message_id: str, emoji: str) -> None:
        await self.media.react(chat, message_id, emoji)

    async def send_sticker(self, chat: ChatRef, sticker: str) -> str | None:
        return await self.media.send_sticker(int(chat.chat_id), sticker, _placement(chat, None))

    async def recording(self, chat: ChatRef) -> None:
        await self.media.recording(chat)

    # ---- streaming -------------------------------------------------------------------

    def open_stream(self, chat: ChatRef, reply_to: str | None) -> ReplyStream | None:
        if not self.config.stream:
            return None
        if chat.is_dm:
            return DraftStream(self.bot, int(chat.chat_id), next(_draft_ids))

        async def send_preview(text: str) -> int:
            where = _placement(chat, reply_to)
            sent = await self.bot.send_message(int(chat.chat_id), text, **where)
            return sent.message_id

        async def edit(message_id: int, text: str, formatted: bool) -> None:
            await self._edit(chat, message_id, text, formatted)

        async def delete(message_id: int) -> None:
            await self.bot.delete_message(int(chat.chat_id), message_id)

        async def can_preview() -> bool:
            # with several partners the reply starts with a name the preview cannot know
            return not self._several_partners(chat)

        return EditStream(send_preview, edit, delete, can_preview)

    async def _edit(self, chat: ChatRef, message_id: int, text: str, formatted: bool) -> None:
        if not formatted:
            await self.bot.edit_message_text(text, int(chat.chat_id), message_id)
            return
        rendered = render(text)
        try:
            await self.bot.edit_message_text(
                rendered.html, int(chat.chat_id), message_id, parse_mode=ParseMode.HTML
            )
        except BadRequest as exc:
            if not _is_markup_error(exc):
                raise
            logger.warning("telegram refused the formatting (%s); editing as plain text", exc)
            await self.bot.edit_message_text(rendered.plain, int(chat.chat_id), message_id)


def _build_bot(config: TelegramConfig) -> Bot:
    assert config.token is not None
    options: dict[str, Any] = {
        "token": config.token.get_secret_value(),
        # getUpdates goes out on a client of its own (adapters/telegram_poll_client.py)
        "request": SendRequest(SEND_POOL_SIZE, POOL_TIMEOUT_SECONDS),
    }
    if config.base_url:
        options["base_url"] = config.base_url  # PTB appends the token itself
        options["base_file_url"] = file_url(config.base_url)
    if config.rate_limit:
        return ExtBot(rate_limiter=AIORateLimiter(), **options)
    return Bot(**options)


def file_url(base_url: str) -> str:
    """Where a self-hosted Bot API server serves files: ``…/bot`` becomes ``…/file/bot``
    (Telegram's own layout), so downloads never leave for api.telegram.org."""
    root, _, last = base_url.rstrip("/").rpartition("/")
    return f"{root}/file/{last}" if root else f"{base_url.rstrip('/')}/file"


def _placement(chat: ChatRef, reply_to: str | None) -> dict[str, Any]:
    """Topic and quote for a send: forum topics keep their thread (the General topic, id 1,
    must be left out), and in groups the reply quotes the message it answers."""
    where: dict[str, Any] = {}
    if chat.thread_id and chat.thread_id != GENERAL_TOPIC:
        where["message_thread_id"] = int(chat.thread_id)
    if not chat.is_dm and reply_to and reply_to.isdigit():
        where["reply_parameters"] = ReplyParameters(int(reply_to), allow_sending_without_reply=True)
    return where


def _keyboard(choices: Sequence[Choice]) -> InlineKeyboardMarkup | None:
    """One button per row; a command too long for callback_data (64 bytes) gets no button."""
    rows = [
        [InlineKeyboardButton(choice.label, callback_data=choice.command)]
        for choice in choices
        if len(choice.command.encode()) <= MAX_CALLBACK_DATA_BYTES
    ]
    return InlineKeyboardMarkup(rows) if rows else None


def _is_markup_error(exc: BadRequest) -> bool:
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
