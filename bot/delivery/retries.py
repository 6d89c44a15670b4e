"""Replies a platform refused: when each is tried again, the loop that tries them when due,
and giving one up.
 A reply refused for now (a 5xx, a timeout, a long flood wait) gets its next attempt stored with
it, after a pause that doubles from ``delivery.first_pause_seconds`` up to ``max_pause_seconds``
and is never shorter than the platform's retry-after, within ``delivery.retry_minutes`` of the
first refusal — so the schedule survives a restart. The loop sends a chat's waiting replies when
one of them is due (through :class:`bot.delivery.sender.Delivery`, which sends a reply from its
first unconfirmed chunk), each under its queue key's lease, taken for the retry; a chat whose key
another worker holds is left to that worker, whose next turn sends the waiting replies first, and
looked at again after the shortest pause. The loop runs on the leading worker only
(:mod:`bot.workers.leadership`); other workers' refusals do not wake it, so it looks for due
retries at least every ``delivery.first_pause_seconds``, which no retry is due sooner than. A reply
refused for good (blocked, chat not found, a bad request) or still refused when its time is up is
marked undeliverable, written to the audit log and reported to the owner (docs/architecture.md
"Decisions": nothing stays pending forever)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from adapters.base import DeliveryError
from bot.config.deployment import DeliveryConfig
from bot.delivery.reply import PendingReply
from bot.events import storable
from bot.services.fault_log import FaultLog
from bot.store import DeliveryRetry, Store
from bot.text.literal import literal_line

logger = logging.getLogger(__name__)

MAX_DOUBLINGS = 30
ERROR_CHARS = 200

NotifyOwner = Callable[[str, str], Awaitable[None]]
"""(platform, text): a DM to the owner, on that platform if they have an id there."""
SendWaiting = Callable[[str], Awaitable[None]]
"""Sends the replies of one chat that wait for a retry, oldest first."""


class ClearChats:
    """Chats this process knows have no reply waiting for a retry, so a send need not ask the
    database before it goes out (most never have one).

    Trusted only where this process is the one gateway writing the database (SQLite: the data
    directory's lock lets one run, and every retry it holds was stored by this process or
    before its start); where workers share a database, another worker may store a retry this
    one hears nothing of, so every send asks. A chat becomes known clear when a look at all
    its waiting replies (whatever their id) found none and no retry was stored here while
    that look was under way; storing a retry forgets every chat (refusals are rare, and the
    stored reply's chat need not be looked up). Nothing adds a retry row but a refusal
    stored here; rows that go (a reply sent or given up, a chat forgotten) only make a look
    find less."""

    def __init__(self, trusted: bool) -> None:
        self.trusted = trusted
        self._clear: set[str] = set()
        self._stored = 0
        """Retries stored by this process: a look that saw it change saw too little."""

    def known_clear(self, chat_key: str) -> bool:
        return chat_key in self._clear

    def looking(self) -> int:
        """Call before a look at a chat's waiting replies; hand the result to :meth:`found`."""
        return self._stored

    def found(self, chat_key: str, looked_at: int, waiting: int) -> None:
        if self.trusted and waiting == 0 and looked_at == self._stored:
            self._clear.add(chat_key)

    def stored(self) -> None:
        """A retry was stored (or may have been): no chat is known clear any more."""
        self._stored += 1
        self._clear.clear()


class DeliveryRetries:
    """The schedule of refused replies and the task that works it."""

    def __init__(
        self,
        store: Store,
        settings: DeliveryConfig,
        notify_owner: NotifyOwner,
        send_waiting: SendWaiting,
        *,
        sole_gateway: bool = False,
    ) -> None:
        self.store = store
        self.clear_chats = ClearChats(sole_gateway)
        """What this process knows of chats without waiting replies (``sole_gateway``: it
        is the only gateway on the database, so its own knowledge is the whole truth)."""
        self.settings = settings
        self.notify_owner = notify_owner
        self.send_waiting = send_waiting
        self._wake = asyncio.Event()
        self._faults = FaultLog("delivery retries", logger)
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    # ---- the loop ----------------------------------------------------------------------

    def start(self) -> None:
        """Start sending the replies whose retry is due."""
        self._closing = False
        self._task = asyncio.create_task(self._loop(), name="delivery retries")

    async def stop(self, grace_seconds: float) -> None:
        """Let a retry under way finish for up to ``grace_seconds``, then stop the loop."""
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), grace_seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _loop(self) -> None:
        while not self._closing:
            self._wake.clear()  # before the queries: a retry scheduled after them wakes us
            try:
                for chat_key in await self.store.chats_with_due_retries(time.time()):
                    if self._closing:
                        return
                    await self.send_waiting(chat_key)
                next_at = await self.store.next_delivery_retry_at()
            except Exception as exc:  # one pass is an outer edge: the loop must keep running
                self._faults.failed(exc)
                next_at = time.time()
            else:
                self._faults.succeeded()
            await self._sleep_until(next_at)

    async def _sleep_until(self, next_at: float | None) -> None:
        """Until the next retry is due, until one is scheduled here, or for the shortest
        pause, whichever comes first. Another worker's refusals schedule retries this loop
        hears nothing of, and none is due sooner than the shortest pause after it; a retry
        still due right after a pass is being sent by another task (or the pass failed)."""
        timeout = self.settings.first_pause_seconds
        remaining = next_at - time.time() if next_at is not None else 0.0
        if remaining > 0:
            timeout = min(timeout, remaining)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._wake.wait()

    # ---- refusals ----------------------------------------------------------------------

    async def refused(self, reply: PendingReply, chunk: int, exc: DeliveryError) -> None:
        """Schedule the next attempt, or give the reply up (for good, or out of time)."""
        message_id = reply.message_id
        error = storable(str(exc) or type(exc).__name__)[:ERROR_CHARS]
        now = time.time()
        before = await self.store.delivery_retry(message_id)
        attempts = (before.attempts if before else 0) + 1
        since = before.first_failed_at if before else now
        deadline = since + self.settings.retry_minutes * 60
        if not exc.retryable or now >= deadline:
            await self._give_up(reply, attempts, error)
            return
        pause = self.pause(attempts)
        if exc.retry_after is not None:
            pause = max(pause, exc.retry_after)
        next_at = min(now + pause, deadline)  # the last try falls on the deadline itself
        try:
            await self.store.schedule_delivery_retry(
                DeliveryRetry(message_id, attempts, since, next_at, error), lease=reply.lease
            )
        finally:  # after the row is in: a look at its chat that began before sees it changed
            self.clear_chats.stored()
        self._wake.set()
        logger.warning(
            "reply %d chunk %d not delivered (%s); attempt %d, next in %.1f s",
            message_id,
            chunk,
            error,
            attempts,
            next_at - now,
        )

    def pause(self, attempts: int) -> float:
        """The pause after the ``attempts``-th refusal: doubling from the first, capped."""
        doubled = self.settings.first_pause_seconds * 2 ** min(attempts - 1, MAX_DOUBLINGS)
        return min(doubled, self.settings.max_pause_seconds)

    async def _give_up(self, reply: PendingReply, attempts: int, error: str) -> None:
        chat = reply.chat
        logger.error(
            "reply %d to %s not delivered; given up after %d attempt(s): %s",
            reply.message_id,
            chat.chat_key,
            attempts,
            error,
        )
        await self.store.mark_failed(reply.message_id, lease=reply.lease)
        await self.store.audit(
            "gateway",
            "reply_undeliverable",
            message=reply.message_id,
            chat=chat.chat_key,
            attempts=attempts,
            error=error,
        )
        tries = "1 try" if attempts == 1 else f"{attempts} tries"
        where = f"{chat.platform} chat {literal_line(chat.platform_chat_id)}"
        await self.notify_owner(
            chat.platform,
            f"A reply could not be delivered to {where} after {tries} "
            f"({literal_line(error)}). It was given up; the audit log keeps a record "
            f"(reply {reply.message_id}).",
        )
