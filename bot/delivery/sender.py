"""Delivering a recorded reply, chunk by chunk, with each confirmed chunk recorded.

A chunk the platform confirmed is never sent again, also after a restart. A crash between the
platform's confirmation and our record can repeat that one chunk: platforms offer no
idempotency key (docs/delivery.md).

Short flood waits are waited out on the spot. A reply the platform refuses for now (a 5xx, a
timeout, a long flood wait) waits for a retry, and one refused for good is given up and
reported to the owner: ``bot/delivery/retries.py`` keeps that schedule and the loop that sends
what is due. Before a reply goes out, the replies of its chat that wait for a retry are tried
first, so one held back by an outage still arrives before those written after it.
Within one process a reply is sent by one task at a time (a turn, the retry loop, start-up
recovery), so two of them never send the same chunk. Across workers, a reply waiting for a
retry goes out only under the lease of its queue key — the key of the turn that wrote it; for
a greeting or check-in, its partner's key of its chat: a turn sends it under its own lease when
the key is its own, and otherwise, like the retry loop, under a lease taken for the retry
(:meth:`bot.workers.worker.Worker.retry_lease`). A key another worker holds is left to that worker,
whose next turn sends the chat's waiting replies first; so no two workers send one at once.

A turn's reply belongs to its chat's queue key. If its delivery is cut off after it was
recorded — the database went away, the lease was lost, the worker died — it stays claimable
with its key, and whichever worker works that key next finishes it under its lease
(:meth:`Delivery.finish`) before it answers anything newer, so a chat's replies keep their
order and nothing waits for a leader change or a restart.

A reply a turn sends carries the turn's lease (:mod:`bot.workers.worker`): before each chunk the
lease is checked (``ensure_lease``), and every record of the reply's progress is fenced by it, so a
worker that lost the chat to another never records, and only in the one window
:mod:`bot.workers.worker` names ever sends, after the other took over. Replies sent outside a turn
(greetings, check-ins and the leader's recovery of those) carry none; a reply sent again
for its retry carries its key's lease, as above.

A reply's actions (``media`` rows: reactions and stickers from its markers, ``speak`` for a
voice reply) are done before its first chunk, once each (``bot/delivery/actions.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import replace

from adapters.base import Channel, DeliveryError, ReplyStream
from bot.config.deployment import DeliveryConfig
from bot.delivery.actions import ReplyActions
from bot.delivery.reply import PartnerFace, PendingReply, outbound, record
from bot.delivery.retries import DeliveryRetries, NotifyOwner
from bot.events import Outbound
from bot.store import ChatRow, Lease, LeaseLost, Store, WaitingReply
from bot.text import markers
from bot.turn.voice_replies import VoiceReplies
from bot.workers.queue_keys import queue_key

logger = logging.getLogger(__name__)

MAX_FLOOD_WAITS = 5
MAX_FLOOD_WAIT_SECONDS = 30.0
"""A flood wait up to this long is waited out on the spot; a longer one is a scheduled retry."""
EnsureLease = Callable[[Lease], Awaitable[None]]
"""Raises :class:`LeaseLost` unless the lease is still this worker's (renewing it if due)."""
RetryLease = Callable[[str, int], contextlib.AbstractAsyncContextManager[Lease | None]]
"""(queue key, reply id) -> the lease of the key to send a reply waiting for a retry under,
None while another worker holds the key (:meth:`bot.workers.worker.Worker.retry_lease`)."""
Unreachable = Callable[[ChatRow], Awaitable[None]]
"""Told when a platform says the user of a DM cannot be written to any more."""


class Delivery:
    def __init__(
        self,
        store: Store,
        channels: dict[str, Channel],
        partner_face: PartnerFace,
        settings: DeliveryConfig,
        notify_owner: NotifyOwner,
        voice: VoiceReplies | None = None,
        *,
        retry_lease: RetryLease,
        ensure_lease: EnsureLease | None = None,
        on_unreachable: Unreachable | None = None,
        sole_gateway: bool = False,
    ) -> None:
        self.store = store
        self.ensure_lease = ensure_lease
        """Raises LeaseLost unless a lease is still this worker's; None: nothing to check."""
        self.retry_lease = retry_lease
        """The lease of a queue key to retry one of its replies under."""
        self.channels = channels
        self.partner_face = partner_face
        self.retries = DeliveryRetries(
            store, settings, notify_owner, self._send_waiting, sole_gateway=sole_gateway
        )
        """Refused replies: their schedule, and the loop that sends them when due
        (``sole_gateway``: no other process stores any; see
        :class:`bot.delivery.retries.ClearChats`)."""
        self.on_unreachable = on_unreachable
        self.actions = ReplyActions(store, voice, partner_face, self._ensure)
        self._sending: set[int] = set()
        """Replies a task is sending right now; any other task leaves them alone."""

    # ---- the ways in -----------------------------------------------------------------

    async def send(self, reply: PendingReply, stream: ReplyStream | None = None) -> bool:
        """Send a reply just recorded; True when every chunk is confirmed. With a ``stream``,
        the live preview may become the first chunk itself."""
        await self._send_waiting(reply.chat.chat_key, reply.message_id, reply.lease)
        with self._sending_one(reply.message_id) as mine:
            return mine and await self._send(reply, stream)

    async def deliver(self, message_id: int, lease: Lease | None = None) -> bool:
        """Send what is left of a recorded reply (its delivery cut off), under the ``lease``
        of its queue key if it has one; True when every chunk is confirmed."""
        row = await self.store.message(message_id)
        if row is None:
            return False
        await self._send_waiting(row.chat_key, message_id, lease)
        return await self._deliver_one(message_id, lease)

    async def finish(self, message_ids: Sequence[int], lease: Lease) -> bool:
        """Finish the replies of a queue key whose delivery an outage, a lost lease or a dead
        worker cut off (:attr:`TurnContext.unfinished`), oldest first, under the key's
        ``lease``; chunks already recorded are not sent again. True when each is settled —
        delivered, waiting for a retry of its own, or given up; False when one could not
        even be tried (no channel for its platform here)."""
        settled = True
        for message_id in message_ids:
            if not await self.deliver(message_id, lease):
                settled = await self._settled(message_id) and settled
        return settled

    async def _settled(self, message_id: int) -> bool:
        """Whether a reply no task is sending needs nothing more from a turn: delivered,
        given up, or waiting for a retry the retry loop sends."""
        if await self._status(message_id) != "delivering":
            return True
        return await self.store.delivery_retry(message_id) is not None

    async def _deliver_one(self, message_id: int, lease: Lease | None = None) -> bool:
        with self._sending_one(message_id) as mine:
            if not mine:
                return False
            reply = await self._recorded(message_id, lease)  # read once ours: nothing stale
            if reply is None:
                return await self._status(message_id) == "delivered"
            return await self._send(replace(reply, lease=lease), None)

    @contextlib.contextmanager
    def _sending_one(self, message_id: int) -> Iterator[bool]:
        """Claim a reply for this task; False if another task is sending it."""
        if message_id in self._sending:
            yield False
            return
        self._sending.add(message_id)
        try:
            yield True
        finally:
            self._sending.discard(message_id)

    async def _status(self, message_id: int) -> str | None:
        row = await self.store.message(message_id)
        return row.status if row else None

    async def redeliver_pending(self) -> int:
        """When this worker starts leading: finish the replies outside every queue
        (greetings, check-ins) a stop or crash cut off mid-delivery. A turn's reply is
        finished by whoever holds its queue key (:meth:`finish`); replies waiting for a retry
        keep their stored schedule (the retry loop's)."""
        interrupted = await self.store.interrupted_deliveries()
        for message_id in interrupted:
            await self.deliver(message_id)
        return len(interrupted)

    # ---- the retry loop --------------------------------------------------------------

    def start(self) -> None:
        """Start sending the replies whose retry is due (App.start, after recovery)."""
        self.retries.start()

    async def stop(self, grace_seconds: float) -> None:
        """Let a retry under way finish for up to ``grace_seconds``, then stop the loop."""
        await self.retries.stop(grace_seconds)

    # ---- sending ---------------------------------------------------------------------

    async def _send_waiting(
        self, chat_key: str, before_id: int | None = None, lease: Lease | None = None
    ) -> None:
        """Try the replies of a chat that wait for a retry (older than ``before_id``), oldest
        first. The whole chat goes together, due or not: what was written first is shown
        first, and each reply is tried once per pass. Each goes under the lease of its queue
        key: the ``lease`` of the turn that sends them when it is that key's, else one taken
        for the retry (:attr:`retry_lease`). The pass stops at a reply whose key another
        worker holds: that worker's next turn sends it first (or a later pass does)."""
        waiting = await self._waiting(chat_key, before_id)
        async with contextlib.AsyncExitStack() as taken:
            leases: dict[str, Lease | None] = {}
            if lease is not None:
                leases[lease.queue_key] = lease
            for reply in waiting:
                key = reply.queue_key or queue_key(chat_key, reply.partner_id)
                if key not in leases:
                    leases[key] = await taken.enter_async_context(
                        self.retry_lease(key, reply.message_id)
                    )
                if not await self._retry_under(reply.message_id, key, leases[key], lease):
                    return

    async def _waiting(self, chat_key: str, before_id: int | None) -> list[WaitingReply]:
        """The chat's replies waiting for a retry older than ``before_id``; none without
        asking when this process knows the chat has none
        (:class:`bot.delivery.retries.ClearChats`). The look is at all of them, so that
        finding none tells of the whole chat."""
        clear = self.retries.clear_chats
        if not clear.trusted:  # asked every time: older than the reply is all that matters
            return await self.store.waiting_replies(chat_key, before_id)
        if clear.known_clear(chat_key):
            return []
        looked_at = clear.looking()
        waiting = await self.store.waiting_replies(chat_key)
        clear.found(chat_key, looked_at, len(waiting))
        return [r for r in waiting if before_id is None or r.message_id < before_id]

    async def _retry_under(
        self, message_id: int, key: str, held: Lease | None, turn_lease: Lease | None
    ) -> bool:
        """Send a waiting reply under ``held``, its key's lease; False when the pass stops
        there: the key is another worker's, or its lease taken for the retry was lost (the
        turn's own lease lost raises, as in the rest of its turn)."""
        if held is None:
            logger.debug(
                "reply %d waits for %s, which another worker holds (or it went out"
                " meanwhile): left to it for now",
                message_id,
                key,
            )
            return False
        try:
            await self._deliver_one(message_id, held)
        except LeaseLost:
            if held is turn_lease:
                raise
            logger.warning(
                "reply %d: the lease on %s was lost; left to its holder", message_id, key
            )
            return False
        return True

    async def _recorded(self, message_id: int, lease: Lease | None) -> PendingReply | None:
        """A reply still being delivered, as stored; None once it is settled. A reply whose
        chat is gone can never be sent: it is given up (or its queue would keep asking)."""
        row = await self.store.message(message_id)
        if row is None or row.status != "delivering":
            return None
        chat = await self.store.chat(row.chat_key)
        if chat is None:
            logger.warning("reply %d: chat %s is gone; given up", message_id, row.chat_key)
            await self.store.mark_failed(message_id, lease=lease)
            return None
        answered = await self.store.answered_message(message_id)
        return PendingReply(
            message_id,
            chat,
            row.text,
            row.partner_id,
            answered.platform_message_id if answered else None,
            await self.store.delivered_chunks(message_id),
        )

    async def _send(self, reply: PendingReply, stream: ReplyStream | None) -> bool:
        """Send a reply from its first unconfirmed chunk, recording each confirmed one."""
        message_id, chat = reply.message_id, reply.chat
        channel = self.channels.get(chat.platform)
        if channel is None:
            logger.warning("reply %d: no channel for %s; kept for later", message_id, chat.chat_key)
            return False
        text = markers.strip(reply.text)
        chunks = channel.split(text) if text else []
        done = reply.delivered_chunks
        if done == 0:
            done = await self.actions.do(reply, channel, text, chunks)
        lease = reply.lease
        if not text:  # the model chose to say nothing (or only to react): nothing is shown
            await self.store.mark_delivered(message_id, lease=lease)
            return True
        if stream is not None and done == 0 and chunks:
            await self._ensure(lease)
            streamed_id = await stream.finish(chunks[0])
            if streamed_id is not None:
                await record(self.store.record_chunk, message_id, 0, streamed_id, lease)
                done = 1
        for index in range(done, len(chunks)):
            message = outbound(
                reply, chunks[index], reply.reply_to if index == 0 else None, self.partner_face
            )
            await self._ensure(lease)
            try:
                platform_id = await self._send_chunk(channel, message)
            except DeliveryError as exc:
                await self._refused(reply, index, exc)
                return False
            if index == len(chunks) - 1:
                await record(self.store.record_last_chunk, message_id, index, platform_id, lease)
                return True
            await record(self.store.record_chunk, message_id, index, platform_id, lease)
        # every chunk was recorded already: a resumed reply, or the stream carried it
        await self.store.mark_delivered(message_id, lease=lease)
        return True

    async def _ensure(self, lease: Lease | None) -> None:
        """Before a chunk goes out: the turn's lease is still this worker's."""
        if lease is not None and self.ensure_lease is not None:
            await self.ensure_lease(lease)

    async def _send_chunk(self, channel: Channel, message: Outbound) -> str | None:
        """One chunk, short flood waits waited out; anything else that goes wrong is a
        DeliveryError (one delivery is an outer edge: a bug in a channel is a refusal)."""
        for _ in range(MAX_FLOOD_WAITS):
            try:
                return await channel.send(message)
            except DeliveryError as exc:
                wait = exc.retry_after
                if not exc.retryable or wait is None or wait > MAX_FLOOD_WAIT_SECONDS:
                    raise
                logger.warning("flood wait: sending again in %.1f s", wait)
                await asyncio.sleep(wait)
            except Exception as exc:
                logger.exception("channel %s failed to send", channel.platform)
                raise DeliveryError(f"{type(exc).__name__}: {exc}", retryable=True) from exc
        return await channel.send(message)

    # ---- refusals --------------------------------------------------------------------

    async def _refused(self, reply: PendingReply, chunk: int, exc: DeliveryError) -> None:
        """A DM whose user cannot be written to any more is reported first; then the reply
        waits for its retry, or is given up (:class:`DeliveryRetries`)."""
        if exc.unreachable and self.on_unreachable is not None:
            await self.on_unreachable(reply.chat)
        await self.retries.refused(reply, chunk, exc)
