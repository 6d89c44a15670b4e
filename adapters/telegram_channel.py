"""The Telegram channel: python-telegram-bot's Bot driven by the gateway's own update loop.

Updates come in by long polling (default) or by webhook (``telegram.mode = "webhook"``), each
confirmed to Telegram only after the gateway has stored it: that is
``adapters/telegram_receiving.py``. python-telegram-bot's own Updater and webhook server
acknowledge before the handler has run, so neither is used. Long polling and the command menu
are the leader's (:meth:`TelegramChannel.lead`): with several workers on one database one of
them polls, while a webhook is served by every worker.

Sending turns the model's Markdown into Telegram HTML (``adapters/telegram_format.py``), falls
back to plain text if Telegram refuses the entities, quotes the answered message in groups,
keeps forum topics apart, and maps PTB's errors to :class:`~adapters.base.DeliveryError`
(``adapters/telegram_sending.py``). A partner with a bot account of its own
(``[telegram.bots]``) speaks in groups through that one, which only ever sends
(``adapters/telegram_bots.py``).
"""

from __future__ import annotations

import asyncio
import html
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from telegram import Bot, Message
from telegram.constants import ChatAction, ParseMode
from telegram.error import InvalidToken, NetworkError, TelegramError

from adapters.base import DeliveryError, Receiver, ReplyStream
from adapters.telegram_bots import PartnerBots, build_bot, may_not_speak
from adapters.telegram_format import Rendered, render
from adapters.telegram_format import split as split_markdown
from adapters.telegram_media import MAX_CAPTION_UTF16, MAX_DOWNLOAD_BYTES, TelegramMedia
from adapters.telegram_menu import set_menus, show_owner_menu
from adapters.telegram_poll_client import PollClient
from adapters.telegram_receiving import TelegramReceiving
from adapters.telegram_sending import (
    delivery_error,
    edit_formatted,
    keyboard,
    placement,
    send_formatted,
)
from adapters.telegram_streams import DraftStream, EditStream
from adapters.telegram_updates import PLATFORM, BotIdentity
from adapters.telegram_webhook import WebhookServer
from bot.config.model import ConfigError
from bot.config.platforms import TelegramConfig
from bot.events import ChannelView, ChatRef, Outbound

logger = logging.getLogger(__name__)

_draft_ids = itertools.count(1)
T = TypeVar("T")


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
        self.bot = build_bot(config, config.token.get_secret_value())
        self.partner_bots = PartnerBots(config)
        """The partners' own bot accounts, which only send (``[telegram.bots]``)."""
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
        for problem in await self.partner_bots.start():
            await receiver.notify_owner(PLATFORM, problem)
        me = self.bot.bot
        partners = tuple(
            (b.user_id, b.username, p) for p, b in self.partner_bots.identities.items()
        )
        self.me = BotIdentity(me.id, me.username or "", partners)
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
        await self.partner_bots.stop()
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
        signed = rendered
        if message.partner_name and self._several_partners(message.chat):
            name = message.partner_name
            signed = Rendered(
                f"<b>{html.escape(name)}</b>: {rendered.html}", f"{name}: {rendered.plain}"
            )

        def put(text: Rendered) -> Callable[[Bot], Awaitable[Message]]:
            markup = keyboard(message.choices)
            reply_to = message.reply_to_message_id
            return lambda bot: send_formatted(bot, message.chat, text, reply_to, markup)

        sent = await self._speaking(message.partner_id, message.chat, put(rendered), put(signed))
        return str(sent.message_id)

    async def _speaking(
        self,
        partner_id: str | None,
        chat: ChatRef,
        act: Callable[[Bot], Awaitable[T]],
        as_main: Callable[[Bot], Awaitable[T]] | None = None,
    ) -> T:
        """``act`` through the bot that speaks for ``partner_id`` in ``chat``: its own bot
        account if it has one there, else — or once that one turns out not to be allowed to
        write there — the main bot (``as_main``: how the main bot does it instead)."""
        own = self.partner_bots.speaker(partner_id, chat)
        try:
            if own is not None and partner_id is not None:
                try:
                    await own.initialize()
                    return await act(own)
                except (TelegramError, DeliveryError) as exc:
                    cause = exc if isinstance(exc, TelegramError) else exc.__cause__
                    if not isinstance(cause, TelegramError) or not may_not_speak(cause):
                        raise
                    notice = self.partner_bots.silence(partner_id, chat, cause)
                    if self.receiver is not None:
                        await self.receiver.notify_owner(PLATFORM, notice)
            await self.bot.initialize()
            return await (as_main or act)(self.bot)
        except TelegramError as exc:
            raise delivery_error(exc) from exc

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
                **placement(chat, None),
            )
        except TelegramError as exc:
            raise delivery_error(exc) from exc
        return str(sent.message_id)

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        # sendChatAction needs the topic even for the General topic (id 1)
        thread = int(chat.thread_id) if chat.thread_id else None
        await self._speaking(
            partner_id,
            chat,
            lambda bot: bot.send_chat_action(
                int(chat.chat_id), ChatAction.TYPING, message_thread_id=thread
            ),
        )

    # ---- media (adapters/telegram_media.py) --------------------------------------------

    async def download(self, ref: str) -> bytes:
        await self.bot.initialize()
        return await self.media.download(ref)

    async def send_voice(self, message: Outbound, audio: bytes) -> str | None:
        where = placement(message.chat, message.reply_to_message_id)
        chat_id = int(message.chat.chat_id)
        return await self._speaking(
            message.partner_id,
            message.chat,
            lambda bot: TelegramMedia(bot, delivery_error).send_voice(
                chat_id, audio, message.text, where
            ),
        )

    async def send_photo(self, message: Outbound, photo: bytes) -> str | None:
        rendered = render(message.text)
        sent = await self._speaking(
            message.partner_id,
            message.chat,
            lambda bot: bot.send_photo(
                int(message.chat.chat_id),
                photo,
                caption=rendered.html,
                parse_mode=ParseMode.HTML,
                reply_markup=keyboard(message.choices),
                **placement(message.chat, message.reply_to_message_id),
            ),
        )
        return str(sent.message_id)

    async def react(
        self, chat: ChatRef, message_id: str, emoji: str, partner_id: str | None = None
    ) -> None:
        await self._speaking(
            partner_id,
            chat,
            lambda bot: TelegramMedia(bot, delivery_error).react(chat, message_id, emoji),
        )

    async def send_sticker(
        self, chat: ChatRef, sticker: str, partner_id: str | None = None
    ) -> str | None:
        where = placement(chat, None)
        return await self._speaking(
            partner_id,
            chat,
            lambda bot: TelegramMedia(bot, delivery_error).send_sticker(
                int(chat.chat_id), sticker, where
            ),
        )

    async def recording(self, chat: ChatRef, partner_id: str | None = None) -> None:
        await self._speaking(
            partner_id, chat, lambda bot: TelegramMedia(bot, delivery_error).recording(chat)
        )

    # ---- streaming -------------------------------------------------------------------

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> ReplyStream | None:
        """A draft in a DM; in a group one message edited as the reply grows, sent and edited
        by the partner's own bot where it has one (only the bot that sent a message may edit
        it)."""
        if not self.config.stream:
            return None
        if chat.is_dm:
            return DraftStream(self.bot, int(chat.chat_id), next(_draft_ids))
        bot = self.partner_bots.speaker(partner_id, chat) or self.bot

        async def send_preview(text: str) -> int:
            await bot.initialize()
            where = placement(chat, reply_to)
            sent = await bot.send_message(int(chat.chat_id), text, **where)
            return sent.message_id

        async def edit(message_id: int, text: str, formatted: bool) -> None:
            await edit_formatted(bot, chat, message_id, text, formatted)

        async def delete(message_id: int) -> None:
            await bot.delete_message(int(chat.chat_id), message_id)

        async def can_preview() -> bool:
            # with several partners the main bot's reply starts with a name the preview
            # cannot know; a partner's own bot needs none
            return bot is not self.bot or not self._several_partners(chat)

        return EditStream(send_preview, edit, delete, can_preview)
