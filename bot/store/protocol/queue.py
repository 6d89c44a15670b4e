"""The work queue and delivery: inbound messages wait as pending rows; a turn closes them and
records its reply in one transaction; each delivered chunk is recorded so it is never sent
twice, and a reply the platform refused waits here for its retry. A turn's writes can be fenced
by its lease.

Part of :class:`bot.store.Store`, implemented once in :class:`bot.store.queue.Queue` (the fenced
writes: :class:`bot.store.queue.SqliteQueue`, :class:`bot.store.postgres.queue.PostgresQueue`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.store.rows import DeliveryRetry, MessageRow, NewMessage, NewUsage, WaitingReply
from bot.store.worker_rows import Lease


class QueueStore(Protocol):
    """Pending turns, their outcome, and the delivery of replies chunk by chunk."""

    async def pending_queue_keys(self) -> list[str]: ...

    async def pending(self, queue_key: str) -> list[MessageRow]: ...

    async def pending_count(self) -> int: ...

    async def finish_turn(
        self,
        inbound_ids: Sequence[int],
        session_id: str | None,
        reply: NewMessage,
        inbound_status: str = "done",
        usage: NewUsage | None = None,
        *,
        lease: Lease | None = None,
        follow: Sequence[NewMessage] = (),
    ) -> int:
        """Close the inbound messages and record the reply, in one transaction, with the
        tokens the reply cost (``usage``) if given. Without a session the inbound messages
        stay out of every session's history.

        Every write that commits a turn's outcome takes the ``lease`` the turn runs under and
        checks it in the same transaction: if another worker took the queue key over, it
        raises :class:`LeaseLost` and writes nothing (None: no lease fences the write). The
        reply joins the lease's queue key: if its delivery is cut off, the key stays
        claimable until its holder finished it (:attr:`TurnContext.unfinished`).

        ``follow`` are messages the reply causes (a scene's hand-overs to other partners),
        recorded in the same transaction: a crash never keeps the reply and loses them. Each
        has a dedup key; one recorded before is skipped."""

    async def count_failed_turn(
        self, message_ids: Sequence[int], *, lease: Lease | None = None
    ) -> int:
        """Count a turn that raised against each of its messages that is still pending; the
        highest count, or 0 when none is pending any more (the turn had recorded its reply)."""

    async def turn_attempts(self, message_id: int) -> int:
        """How many turns raised while this message waited for its answer."""

    async def assign_session(self, message_ids: Sequence[int], session_id: str) -> None: ...

    async def close_unanswered(
        self, message_ids: Sequence[int], session_id: str, *, lease: Lease | None = None
    ) -> None:
        """Keep messages in their session's history without a reply (a resting partner)."""

    async def mark_delivered(self, message_id: int, *, lease: Lease | None = None) -> None: ...

    async def set_status(self, message_id: int, status: str) -> None: ...

    async def mark_failed(self, message_id: int, *, lease: Lease | None = None) -> None: ...

    async def interrupted_deliveries(self) -> list[int]:
        """Replies outside every queue (greetings, check-ins) that a stop or crash cut off
        while they were being sent (none waits for a retry of its own: those are the retry
        loop's). A turn's reply is in its queue key's :attr:`TurnContext.unfinished`."""

    async def delivery_retry(self, message_id: int) -> DeliveryRetry | None: ...

    async def schedule_delivery_retry(
        self, retry: DeliveryRetry, *, lease: Lease | None = None
    ) -> None: ...

    async def chats_with_due_retries(self, now: float) -> list[str]:
        """Chats with a reply whose next attempt is due, the one waiting longest first."""

    async def next_delivery_retry_at(self) -> float | None: ...

    async def waiting_replies(
        self, chat_key: str, before_id: int | None = None
    ) -> list[WaitingReply]:
        """Replies of a chat that wait for a retry (older than ``before_id``), oldest first,
        each with what names the queue key it is sent under: at least those that waited when
        reply ``before_id`` was recorded (a backend may answer the first look after a turn's
        recording from it, and a retry stored meanwhile by another key is then seen by the
        next look)."""

    async def delivered_chunks(self, message_id: int) -> int: ...

    async def record_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None: ...

    async def record_last_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None:
        """:meth:`record_chunk` for a reply's last chunk and :meth:`mark_delivered`, in one
        transaction and one round trip."""

    async def answered_message(self, reply_id: int) -> MessageRow | None:
        """The last inbound message a reply answers (what the reply should quote)."""

    async def reply_for_platform_message(
        self, chat_key: str, platform_message_id: str
    ) -> MessageRow | None:
        """The reply one of whose chunks is this platform message, if any."""
