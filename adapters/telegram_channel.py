"""The Telegram channel: python-telegram-bot's Bot driven by the gateway's own update loop.

Updates come in by long polling (default) or by webhook (``telegram.mode = "webhook"``). Either
way an update is confirmed to Telegram only after the gateway has stored it (DESIGN.md,
"Decisions"): polling advances its offset past a batch only once :meth:`Receiver.receive`
returned for every update in it (chats side by side, each chat in order), and the webhook
(``adapters/telegram_webhook.py``) answers 200 only then. python-telegram-bot's own Updater and
webhook server acknowledge before the handler has run, so neither is used. Update ids are
recorded in the store, so an update delivered twice (also across a restart) is handled once.
Each update is parsed on its own: one python-telegram-bot cannot read is logged, recorded as
rejected and confirmed with its batch, whose other updates are handled as usual.

A polling watchdog restarts a long poll that has not come back within ``watchdog_seconds``
(a connection that hangs without an error). Network errors and flood waits back off and retry.

Sending turns the model's Markdown into Telegram HTML (``adapters/telegram_format.py``), falls
back to plain text if Telegram refuses the entities, quotes the answered message in groups,
keeps forum topics apart, and maps PTB's errors to :class:`~adapters.base.DeliveryError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import logging
import secrets
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeChat,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
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
from telegram.request import HTTPXRequest
from telegram.warnings import PTBUserWarning

from adapters.base import DeliveryError, NotStored, Receiver, ReplyStream
from adapters.telegram_format import Rendered, render
from adapters.telegram_format import split as split_markdown
from adapters.telegram_media import MAX_CAPTION_UTF16, MAX_DOWNLOAD_BYTES, TelegramMedia
from adapters.telegram_streams import DraftStream, EditStream, retry_after_seconds
from adapters.telegram_updates import (
    GROUP_TYPES,
    PLATFORM,
    BotIdentity,
    Unsupported,
    chat_of,
    update_event,
)
from adapters.telegram_webhook import WebhookServer
from bot.commands import COMMANDS, parse_command
from bot.config import ConfigError, TelegramConfig
from bot.events import ChatRef, Choice, Inbound, Outbound, Reaction

logger = logging.getLogger(__name__)

MAX_COMMAND_FILE_BYTES = 20 * 1024 * 1024
"""Files sent with an /admin command: edited persona files are small, a character card
(``/admin partner import``) may take a few megabytes; each command checks its own limit."""

ALLOWED_UPDATES = ("message", "callback_query", "message_reaction")
GENERAL_TOPIC = "1"
MAX_CALLBACK_DATA_BYTES = 64
SEND_POOL_SIZE = 32
POOL_TIMEOUT_SECONDS = 10.0
BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
CONFIRM_TIMEOUT_SECONDS = 5.0
POLL_READ_MARGIN_SECONDS = 5.0
"""How much longer than its own timeout a long poll's answer may take (PTB's default)."""
UNSUPPORTED_REPLY = "Sorry — I can't open that kind of file. Could you write it down for me?"
NOT_STORED_NOTICE = (
    "I cannot store incoming Telegram messages: {error}. Is the disk full? They stay with "
    "Telegram and are answered once they can be stored."
)
_draft_ids = itertools.count(1)

# The poll reads getUpdates' answer unparsed (TelegramChannel._get_updates), and PTB warns that
# it has a method for that endpoint: the one that parses the batch as a whole. (pytest resets
# warning filters per test; pyproject.toml repeats this one for the tests.)
warnings.filterwarnings("ignore", r"Please use 'Bot\.getUpdates'", PTBUserWarning)


def _menu(owner: bool) -> list[BotCommand]:
    """The command menu: the user commands, and for an owner the owner's after them."""
    users = [BotCommand(c.name, c.help) for c in COMMANDS.values() if not c.owner_only]
    owners = [BotCommand(c.name, c.help) for c in COMMANDS.values() if c.owner_only]
    return users + owners if owner else users


class PollStalled(Exception):
    """No getUpdates answer within the watchdog's time."""


class UnreadableAnswer(Exception):
    """getUpdates answered something other than a list of updates with ids."""


class TelegramChannel:
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
        self.me: BotIdentity | None = None
        self.watchdog_restarts = 0
        self._stopping = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self._offset: int | None = None
        self._webhook: WebhookServer | None = None
        self._last_poll_at: float | None = None
        self._not_storing = False

    @property
    def connected(self) -> bool:
        """Webhook: the listener runs. Polling: a getUpdates succeeded within the watchdog's
        time (a healthy long poll answers at least every ``poll_timeout_seconds``)."""
        if self.config.mode == "webhook":
            return self._webhook is not None
        last = self._last_poll_at
        return last is not None and time.monotonic() - last < self.config.watchdog_seconds

    # ---- lifecycle -------------------------------------------------------------------

    async def start(self, receiver: Receiver) -> None:
        self.receiver = receiver
        await self._initialize()
        me = self.bot.bot
        self.me = BotIdentity(me.id, me.username or "")
        receiver.note_bot_identity(PLATFORM, me.username, me.can_read_all_group_messages)
        await self._set_commands()
        self._stopping.clear()
        if self.config.mode == "webhook":
            await self._start_webhook()
        else:
            await self.bot.delete_webhook()
            self._poller = asyncio.create_task(self._poll_loop(), name="telegram polling")
        logger.info("telegram: @%s connected (%s)", me.username, self.config.mode)

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
        self._stopping.set()
        poller, self._poller = self._poller, None
        if poller is not None:
            await poller
            await self._confirm_offset()
        server, self._webhook = self._webhook, None
        if server is not None:
            await server.stop()
        await self.bot.shutdown()

    async def _set_commands(self) -> None:
        """The command menu: user commands for everyone, /admin too in the owners' chats
        (config.toml's owners and those who claimed the bot)."""
        assert self.receiver is not None
        owners = [int(i) for i in self.receiver.owner_ids(PLATFORM) if i.lstrip("-").isdigit()]
        try:
            await self.bot.set_my_commands(_menu(owner=False))
            for owner_id in dict.fromkeys([*self.owner_ids, *owners]):
                await self.bot.set_my_commands(
                    _menu(owner=True), scope=BotCommandScopeChat(owner_id)
                )
        except TelegramError as exc:
            logger.warning("telegram: command menu not set (%s); commands still work", exc)

    async def show_owner_commands(self, user_id: str) -> None:
        """A new owner (a claim) sees /admin in the menu of their chat with the bot."""
        try:
            await self.bot.set_my_commands(
                _menu(owner=True), scope=BotCommandScopeChat(int(user_id))
            )
        except TelegramError as exc:
            logger.warning("telegram: owner's command menu not set (%s); /admin works", exc)

    # ---- polling ---------------------------------------------------------------------

    async def _poll_loop(self) -> None:
        backoff = unstored_wait = BACKOFF_SECONDS
        while not self._stopping.is_set():
            wait = 0.0
            try:
                updates = await self._poll()
                backoff = BACKOFF_SECONDS
                self._last_poll_at = time.monotonic()
            except PollStalled:
                self.watchdog_restarts += 1
                logger.warning(
                    "telegram: no getUpdates answer for %d s; restarting the poll",
                    self.config.watchdog_seconds,
                )
                continue
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
            except TelegramError as exc:
                # Network trouble, Telegram's 5xx, a Conflict (a webhook or another poller):
                # nothing to do but wait and ask again.
                logger.warning("telegram: getUpdates failed (%s); retrying in %.0f s", exc, backoff)
                wait, backoff = backoff, min(backoff * 2, MAX_BACKOFF_SECONDS)
            except Exception:
                # Not a list of updates at all (each update is parsed on its own, later):
                # log it loudly, keep polling.
                logger.exception("telegram: getUpdates answer not understood")
                wait, backoff = backoff, min(backoff * 2, MAX_BACKOFF_SECONDS)
            else:
                if updates is None:
                    return
                if not updates:
                    continue
                if await self._handle_batch(updates):
                    # Confirmed to Telegram by the next getUpdates, now that all are stored.
                    self._offset = max(_update_id(u) or 0 for u in updates) + 1
                    unstored_wait = BACKOFF_SECONDS
                    continue
                # Some could not be stored: the batch stays with Telegram and comes again
                # (the updates that were stored are recognised and skipped then).
                wait, unstored_wait = unstored_wait, min(unstored_wait * 2, MAX_BACKOFF_SECONDS)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), wait)

    async def _handle_batch(self, payloads: Sequence[dict[str, Any]]) -> bool:
        """Each update parsed on its own: one that python-telegram-bot cannot read is
        rejected, not its batch. Then chats side by side, each chat's updates in order: one
        busy chat (or a slow store) must not hold up the others, and order inside a chat is
        the conversation. False if some update could not be stored (its chat's later updates
        then wait)."""
        by_chat: dict[int | None, list[Update]] = defaultdict(list)
        unreadable: list[dict[str, Any]] = []
        for payload in sorted(payloads, key=lambda p: _update_id(p) or 0):
            update = self._parse(payload)
            if update is None:
                unreadable.append(payload)
                continue
            chat = update.effective_chat
            by_chat[chat.id if chat is not None else None].append(update)
        rejected = [await self._reject(payload) for payload in unreadable]

        async def in_order(chat_updates: list[Update]) -> bool:
            for update in chat_updates:
                if not await self.handle_update(update):
                    return False
            return True

        stored = await asyncio.gather(*(in_order(updates) for updates in by_chat.values()))
        return all(rejected) and all(stored)

    async def _poll(self) -> list[dict[str, Any]] | None:
        """One long poll; None when stopping. Raises PollStalled past the watchdog time."""
        request = asyncio.create_task(self._get_updates(self.config.poll_timeout_seconds))
        stopping = asyncio.create_task(self._stopping.wait())
        done, _ = await asyncio.wait(
            {request, stopping},
            timeout=self.config.watchdog_seconds,
            return_when=asyncio.FIRST_COMPLETED,
        )
        stopping.cancel()
        if request in done:
            return request.result()
        request.cancel()
        await asyncio.gather(request, return_exceptions=True)
        if stopping in done:
            return None
        raise PollStalled

    async def _confirm_offset(self) -> None:
        """Tell Telegram what was stored before stopping, so a restart starts after it."""
        if self._offset is None:
            return
        try:
            async with asyncio.timeout(CONFIRM_TIMEOUT_SECONDS):
                await self._get_updates(poll_seconds=0, limit=1)
        except (TelegramError, TimeoutError, UnreadableAnswer) as exc:
            logger.info("telegram: final offset not confirmed (%s); duplicates are skipped", exc)

    async def _get_updates(
        self, poll_seconds: int, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """getUpdates' answer with each update still unparsed. python-telegram-bot's own
        get_updates parses the batch as a whole: one update it cannot read fails them all,
        the offset cannot advance, and the same batch comes back for ever."""
        answer = await self.bot.do_api_request(
            "getUpdates",
            api_kwargs={
                "offset": self._offset,
                "limit": limit,
                "timeout": poll_seconds,
                "allowed_updates": list(ALLOWED_UPDATES),
            },
            read_timeout=poll_seconds + POLL_READ_MARGIN_SECONDS,
        )
        if not isinstance(answer, list) or any(_update_id(u) is None for u in answer):
            raise UnreadableAnswer("getUpdates did not answer a list of updates with ids")
        return answer

    # ---- webhook ---------------------------------------------------------------------

    async def _start_webhook(self) -> None:
        url = self.config.webhook_url
        assert url is not None  # the config requires it in webhook mode
        configured = self.config.webhook_secret
        secret = configured.get_secret_value() if configured else secrets.token_urlsafe(32)
        server = WebhookServer(
            self.config.webhook_listen,
            self.config.webhook_port,
            url,
            secret,
            self.handle_payload,
        )
        await server.start()
        self._webhook = server
        await self.bot.set_webhook(url, secret_token=secret, allowed_updates=ALLOWED_UPDATES)

    # ---- one update (the per-update edge) --------------------------------------------

    async def handle_payload(self, payload: dict[str, Any]) -> bool:
        """An update as JSON (webhook): parsed on its own, so a malformed one only costs
        itself. False if it could not be stored (Telegram must send it again)."""
        if _update_id(payload) is None:
            logger.warning("telegram: a webhook update without an update_id was ignored")
            return True
        update = self._parse(payload)
        if update is None:
            return await self._reject(payload)
        return await self.handle_update(update)

    def _parse(self, payload: dict[str, Any]) -> Update | None:
        """The update as python-telegram-bot's object, or None if it cannot read it (a shape
        from a newer Bot API, a damaged payload). Logged by its id: no URL, so no token."""
        try:
            return Update.de_json(payload, self.bot)
        except Exception:
            logger.exception(
                "telegram: update %s not understood; recorded as rejected and skipped",
                payload.get("update_id"),
            )
            return None

    async def _reject(self, payload: dict[str, Any]) -> bool:
        """Record an unreadable update as rejected: it is confirmed with its batch, skipped if
        it comes again, and can be found. False if that could not be stored (it then stays
        with Telegram and comes again)."""
        assert self.receiver is not None
        update_id = str(payload["update_id"])
        try:
            await self.receiver.reject_update(PLATFORM, update_id)
        except NotStored as exc:
            await self._not_stored(update_id, exc)
            return False
        return True

    async def _command_file(self, message: Message) -> tuple[str, bytes] | None:
        """The document sent with an /admin caption (an edited persona file, a character
        card), if it is within the limit."""
        document = message.document
        parsed = parse_command(message.caption or "")
        if document is None or parsed is None or parsed[0] != "admin":
            return None  # only the owner's commands take files: nobody else's is downloaded
        if (document.file_size or 0) > MAX_COMMAND_FILE_BYTES:
            return None  # the command answers that it needs the file
        try:
            file = await self.bot.get_file(document.file_id)
            data = await file.download_as_bytearray()
        except TelegramError as exc:
            logger.warning("telegram: document %s not downloaded: %s", document.file_name, exc)
            return None
        return document.file_name or "document", bytes(data)

    async def handle_update(self, update: Update) -> bool:
        """Deduplicate, convert and hand over one update. Never raises: one bad update must
        not stop the ones after it. False only if it could not be stored: it must then stay
        with Telegram (not confirmed), to be offered again.

        The update id is recorded only once the update is handled (its message stored): a
        crash in between must leave it unrecorded, or the copy Telegram delivers again after
        the restart would be skipped and the message lost. That copy's message is then
        deduplicated by its message id."""
        assert self.receiver is not None
        update_id = str(update.update_id)
        try:
            if await self.receiver.update_seen(PLATFORM, update_id):
                logger.info("telegram: update %s seen before; skipped", update_id)
                return True
            event = await self.event_of(update)
            if isinstance(event, Reaction):
                await self.receiver.receive_reaction(event)
            elif isinstance(event, Inbound):
                if update.message is not None and update.message.document is not None:
                    event = replace(event, attachment=await self._command_file(update.message))
                await self.receiver.receive(event)
            elif isinstance(event, Unsupported) and event.chat.is_dm:
                await self.send(Outbound(event.chat, UNSUPPORTED_REPLY))
            await self.receiver.seen_update(PLATFORM, update_id)
        except NotStored as exc:
            await self._not_stored(update_id, exc)
            return False
        except DeliveryError as exc:
            logger.warning("telegram: answer to update %s not sent: %s", update.update_id, exc)
        except Exception:
            logger.exception("telegram: update %s not handled", update.update_id)
        if self._not_storing:
            self._not_storing = False
            logger.info("telegram: storing updates again")
        return True

    async def _not_stored(self, update_id: str, exc: Exception) -> None:
        """Log every update left with Telegram; tell the owner once per stretch of trouble."""
        logger.error(
            "telegram: update %s not stored (%s); it stays with Telegram and comes again",
            update_id,
            exc,
        )
        if self._not_storing or self.receiver is None:
            return
        self._not_storing = True
        try:
            await self.receiver.notify_owner(PLATFORM, NOT_STORED_NOTICE.format(error=exc))
        except Exception:
            logger.exception("telegram: the owner could not be told")

    async def event_of(self, update: Update) -> Inbound | Unsupported | Reaction | None:
        """What the update means for the gateway (answers a pressed button on the way)."""
        assert self.receiver is not None and self.me is not None
        if update.callback_query is not None:
            try:
                await update.callback_query.answer()
            except TelegramError as exc:
                logger.info("telegram: button press not acknowledged (%s)", exc)
        partners: list[tuple[str, str]] = []
        message = update.message
        if message is not None and message.chat.type in GROUP_TYPES:
            chat = chat_of(message)
            if chat is not None:
                partners = await self.receiver.partner_names(chat)
        return update_event(update, self.me, partners)

    # ---- sending ---------------------------------------------------------------------

    def split(self, text: str) -> list[str]:
        return split_markdown(text) or [text]

    async def send(self, message: Outbound) -> str | None:
        rendered = render(message.text)
        if not rendered.plain.strip():
            rendered = Rendered(html.escape(message.text), message.text)
        if message.partner_name and await self._several_partners(message.chat):
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

    async def _several_partners(self, chat: ChatRef) -> bool:
        """A group with more than one partner bound: each reply says who is speaking."""
        if chat.is_dm or self.receiver is None:
            return False
        return len(await self.receiver.partner_names(chat)) > 1

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
            return not await self._several_partners(chat)

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


# ---- helpers ---------------------------------------------------------------------------


def _update_id(payload: object) -> int | None:
    """The ``update_id`` of a raw update, or None if it has none (nothing to confirm it by)."""
    if not isinstance(payload, dict):
        return None
    update_id = payload.get("update_id")
    return update_id if type(update_id) is int else None


def _build_bot(config: TelegramConfig) -> Bot:
    assert config.token is not None
    options: dict[str, Any] = {
        "token": config.token.get_secret_value(),
        "request": HTTPXRequest(
            connection_pool_size=SEND_POOL_SIZE, pool_timeout=POOL_TIMEOUT_SECONDS
        ),
        # its own connection: a long poll must never wait for (or block) a send
        "get_updates_request": HTTPXRequest(connection_pool_size=1),
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
