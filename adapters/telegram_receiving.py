"""Receiving on Telegram: the long poll, the webhook, and the per-update edge.

Either way an update is confirmed to Telegram only after the gateway has stored it
(docs/architecture.md, "Decisions"): polling advances its offset past a batch only once
:meth:`Receiver.receive` returned for every update in it (chats side by side, each chat in order),
and the webhook (``adapters/telegram_webhook.py``) answers 200 only then. Every event carries its
update id, which the gateway records, so an update delivered twice (also across a restart) is
handled once. Each update is
parsed on its own: one python-telegram-bot cannot read is logged, recorded as rejected and
confirmed with its batch. A polling watchdog restarts a long poll that has not come back within
``watchdog_seconds``; network errors and flood waits back off and retry. A getUpdates cut off (by
the watchdog, or the leadership lost) or failed on the network leaves its HTTP client behind: the
next one goes out on a fresh client (``adapters/telegram_poll_client.py``). How long polling has
failed without a success in between is kept for the leader, which gives the leadership up when it
fails too long (``bot/workers/leadership.py``).

:class:`TelegramReceiving` is the part of :class:`~adapters.telegram_channel.TelegramChannel`
that does this; the channel holds the state it reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from telegram import Bot, Update
from telegram.error import NetworkError, RetryAfter, TelegramError
from telegram.warnings import PTBUserWarning

from adapters.base import NotStored, Receiver
from adapters.telegram_poll_client import PollClient
from adapters.telegram_streams import retry_after_seconds
from adapters.telegram_updates import PLATFORM, BotIdentity, update_event
from adapters.telegram_webhook import WebhookServer
from bot.config.platforms import TelegramConfig
from bot.events import Event, Unreadable

logger = logging.getLogger(__name__)

# The poll reads getUpdates' answer unparsed (TelegramReceiving._get_updates), and PTB warns that
# it has a method for that endpoint: the one that parses the batch as a whole. (pytest resets
# warning filters per test; pyproject.toml repeats this one for the tests.)
warnings.filterwarnings("ignore", r"Please use 'Bot\.getUpdates'", PTBUserWarning)

ALLOWED_UPDATES = ("message", "callback_query", "message_reaction")
BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
CONFIRM_TIMEOUT_SECONDS = 5.0
POLL_READ_MARGIN_SECONDS = 5.0
"""How much longer than its own timeout a long poll's answer may take (PTB's default)."""
NOT_STORED_NOTICE = (
    "I cannot store incoming Telegram messages: {error}. Is the disk full? They stay with "
    "Telegram and are answered once they can be stored."
)


class PollStalled(Exception):
    """No getUpdates answer within the watchdog's time."""


class UnreadableAnswer(Exception):
    """getUpdates answered something other than a list of updates with ids."""


class TelegramReceiving:
    """Polling, the webhook and the per-update edge of the Telegram channel."""

    config: TelegramConfig
    bot: Bot
    receiver: Receiver | None
    me: BotIdentity | None
    watchdog_restarts: int
    _stopping: asyncio.Event
    _poller: asyncio.Task[None] | None
    _offset: int | None
    _webhook: WebhookServer | None
    _last_poll_at: float | None
    _not_storing: bool
    _poll_client: PollClient | None
    _poll_failure: tuple[float, str] | None
    """Since when (``time.monotonic()``) getUpdates has failed with no success since, and the
    last failure; None while it works."""

    def duties_failing(self) -> tuple[float, str] | None:
        """Since when polling has failed without a success in between, and how it last
        failed; None while it works or this worker does not poll (see
        :class:`bot.workers.leadership.FallibleDuties`)."""
        return self._poll_failure if self._poller is not None else None

    async def _poll_loop(self) -> None:
        backoff = unstored_wait = BACKOFF_SECONDS
        self._poll_failure = None
        while not self._stopping.is_set():
            wait = 0.0
            try:
                updates = await self._poll()
            except Exception as exc:  # this task is an outer edge: each failure is handled
                wait, backoff = await self._poll_failed(exc, backoff)
            else:
                if updates is None:
                    return
                backoff = BACKOFF_SECONDS
                self._last_poll_at = time.monotonic()
                self._poll_failure = None
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
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), wait)

    async def _poll_failed(self, exc: Exception, backoff: float) -> tuple[float, float]:
        """Say how a poll failed and count it; how long to wait before the next poll, and
        the backoff after that."""
        if isinstance(exc, PollStalled):
            self.watchdog_restarts += 1
            self._polling_failed("no getUpdates answer within the watchdog's time")
            logger.warning(
                "telegram: no getUpdates answer for %d s; restarting the poll",
                self.config.watchdog_seconds,
            )
            return 0.0, backoff
        self._polling_failed(str(exc))
        if isinstance(exc, RetryAfter):
            return retry_after_seconds(exc), backoff
        if isinstance(exc, TelegramError):
            # Network trouble, Telegram's 5xx, a Conflict (a webhook or another poller):
            # nothing to do but wait and ask again.
            logger.warning("telegram: getUpdates failed (%s); retrying in %.0f s", exc, backoff)
            if isinstance(exc, NetworkError):  # its connection may be left in any state
                await self._drop_poll_client()
        else:
            # Not a list of updates at all (each update is parsed on its own, later):
            # log it loudly, keep polling.
            logger.error("telegram: getUpdates answer not understood", exc_info=exc)
        return backoff, min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _polling_failed(self, reason: str) -> None:
        since = self._poll_failure[0] if self._poll_failure else time.monotonic()
        self._poll_failure = (since, reason)

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
        await self._drop_poll_client()  # never again the client of a request cut off
        if stopping in done:
            return None
        raise PollStalled

    async def _drop_poll_client(self) -> None:
        """Close the poll's client: the next getUpdates goes out on a fresh one."""
        client, self._poll_client = self._poll_client, None
        if client is not None:
            await client.close()

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
        if self._poll_client is None:
            self._poll_client = PollClient(self.config)
        answer = await self._poll_client.bot.do_api_request(
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

    async def _start_webhook(self) -> None:
        url = self.config.webhook_url
        assert url is not None  # the config requires it in webhook mode
        secret = webhook_secret(self.config)
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
            await self.receiver.receive(Unreadable(PLATFORM, update_id))
        except NotStored as exc:
            await self._not_stored(update_id, exc)
            return False
        return True

    async def handle_update(self, update: Update) -> bool:
        """Convert and hand over one update (the gateway skips one it handled before). Never
        raises: one bad update must not stop the ones after it. False only if it could not
        be stored: it must then stay with Telegram (not confirmed), to be offered again."""
        assert self.receiver is not None
        try:
            event = await self.event_of(update)
            if event is not None:
                await self.receiver.receive(event)
        except NotStored as exc:
            await self._not_stored(str(update.update_id), exc)
            return False
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

    async def event_of(self, update: Update) -> Event | None:
        """What the update means for the gateway (answers a pressed button on the way)."""
        assert self.me is not None
        if update.callback_query is not None:
            try:
                await update.callback_query.answer()
            except TelegramError as exc:
                logger.info("telegram: button press not acknowledged (%s)", exc)
        return update_event(update, self.me)


def _update_id(payload: object) -> int | None:
    """The ``update_id`` of a raw update, or None if it has none (nothing to confirm it by)."""
    if not isinstance(payload, dict):
        return None
    update_id = payload.get("update_id")
    return update_id if type(update_id) is int else None


def webhook_secret(config: TelegramConfig) -> str:
    """The secret Telegram sends with every webhook request: ``webhook_secret`` if set, else
    one made from the bot token, so every worker behind one load balancer expects the same
    secret (a random one per worker would leave all but the last to register refusing
    Telegram with 403). It cannot be worked back to the token."""
    if config.webhook_secret is not None:
        return config.webhook_secret.get_secret_value()
    assert config.token is not None  # a channel is built only with a token
    token = config.token.get_secret_value().encode()
    return hmac.new(token, b"companion-gateway webhook secret", hashlib.sha256).hexdigest()
