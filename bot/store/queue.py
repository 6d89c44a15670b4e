"""The work queue and delivery: inbound messages wait as rows (``status = 'pending'``), not only
in memory, so restart recovery is a query; a turn closes them and records its reply in one
transaction; each delivered chunk is recorded so it is never sent twice, and a reply the
platform refused waits for its retry here. Each write that commits a turn's outcome can be
fenced by the turn's lease (:mod:`bot.store.workers`): checked in the same transaction, it is
refused with :class:`LeaseLost` once another worker has taken the queue key over.

One query text for both backends but for those fenced writes: :class:`SqliteQueue` here (the
lease checked, then the writes, in one transaction) and :mod:`bot.store.postgres.queue` (one
fenced statement each, one round trip)."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import astuple, replace
from typing import Any

from bot.store.base import Transaction
from bot.store.connection import SqliteBase
from bot.store.leases import check_lease
from bot.store.messages import Messages
from bot.store.rows import DeliveryRetry, MessageRow, NewMessage, NewUsage, WaitingReply
from bot.store.usage import ADD_GROUP_TOKENS, ADD_USAGE
from bot.store.worker_rows import Lease

RECORD_CHUNK = (
    "INSERT INTO deliveries (message_id, chunk, platform_message_id, sent_at)"
    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
MARK_DELIVERED = "UPDATE messages SET status = 'delivered' WHERE id = ?"
MARK_FAILED = "UPDATE messages SET status = 'undeliverable' WHERE id = ?"
SCHEDULE_DELIVERY_RETRY = (
    "INSERT INTO delivery_retries (message_id, attempts, first_failed_at,"
    " next_attempt_at, last_error) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (message_id) DO UPDATE SET attempts = excluded.attempts,"
    " first_failed_at = excluded.first_failed_at,"
    " next_attempt_at = excluded.next_attempt_at, last_error = excluded.last_error"
)


def queued_reply(reply: NewMessage, inbound_ids: Sequence[int], lease: Lease | None) -> NewMessage:
    """The reply as a turn records it: answering the last of its inbound messages, and in the
    queue of the lease it was written under, so that if its delivery is cut off whoever holds
    that key next finishes it (:func:`~bot.store.workers.unfinished_replies`)."""
    queue_key = reply.queue_key or (lease.queue_key if lease is not None else None)
    return replace(reply, answers_upto=max(inbound_ids), queue_key=queue_key)


def marks(values: Sequence[Any]) -> str:
    """One ``?`` per value, for ``IN (…)``."""
    return ", ".join("?" for _ in values)


class Queue(Messages):
    """Pending turns, their replies and the delivery of each chunk."""

    async def pending_queue_keys(self) -> list[str]:
        rows = await self._all(
            "SELECT queue_key FROM messages WHERE status = 'pending'"
            " GROUP BY queue_key ORDER BY min(id)"
        )
        return [row[0] for row in rows]

    async def pending(self, queue_key: str) -> list[MessageRow]:
        return await self._messages(
            "WHERE status = 'pending' AND queue_key = ? ORDER BY id", queue_key
        )

    async def pending_count(self) -> int:
        row = await self._one("SELECT COUNT(*) FROM messages WHERE status = 'pending'")
        return int(row[0]) if row else 0

    async def turn_attempts(self, message_id: int) -> int:
        """How many turns raised while this message waited for its answer."""
        row = await self._one("SELECT turn_attempts FROM messages WHERE id = ?", message_id)
        return int(row[0]) if row else 0

    async def assign_session(self, message_ids: Sequence[int], session_id: str) -> None:
        if message_ids:
            await self._write(
                f"UPDATE messages SET session_id = ? WHERE id IN ({marks(message_ids)})",
                session_id,
                *message_ids,
            )

    async def set_status(self, message_id: int, status: str) -> None:
        await self._write("UPDATE messages SET status = ? WHERE id = ?", status, message_id)

    async def interrupted_deliveries(self) -> list[int]:
        """Replies outside every queue (greetings, check-ins) that a stop or crash cut off
        while they were being sent. A reply of a queue is finished by whoever holds its key
        (:func:`~bot.store.workers.unfinished_replies`), and one waiting for a retry of its
        own is the retry loop's."""
        rows = await self._all(
            "SELECT id FROM messages WHERE status = 'delivering' AND queue_key IS NULL"
            " AND id NOT IN (SELECT message_id FROM delivery_retries) ORDER BY id"
        )
        return [int(row[0]) for row in rows]

    async def delivery_retry(self, message_id: int) -> DeliveryRetry | None:
        row = await self._one(
            "SELECT message_id, attempts, first_failed_at, next_attempt_at, last_error"
            " FROM delivery_retries WHERE message_id = ?",
            message_id,
        )
        return DeliveryRetry(*row) if row else None

    async def chats_with_due_retries(self, now: float) -> list[str]:
        """Chats with a reply whose next attempt is due, the one waiting longest first."""
        rows = await self._all(
            "SELECT m.chat_key FROM delivery_retries r JOIN messages m ON m.id = r.message_id"
            " WHERE r.next_attempt_at <= ? AND m.status = 'delivering'"
            " GROUP BY m.chat_key ORDER BY MIN(m.id)",
            now,
        )
        return [str(row[0]) for row in rows]

    async def next_delivery_retry_at(self) -> float | None:
        row = await self._one("SELECT MIN(next_attempt_at) FROM delivery_retries")
        return float(row[0]) if row and row[0] is not None else None

    async def delivered_chunks(self, message_id: int) -> int:
        row = await self._one("SELECT COUNT(*) FROM deliveries WHERE message_id = ?", message_id)
        return int(row[0]) if row else 0

    async def mark_delivered(self, message_id: int, *, lease: Lease | None = None) -> None:
        await self._fenced(lease, self._MARK_DELIVERED, message_id)

    async def mark_failed(self, message_id: int, *, lease: Lease | None = None) -> None:
        await self._fenced(lease, self._MARK_FAILED, message_id)

    async def schedule_delivery_retry(
        self, retry: DeliveryRetry, *, lease: Lease | None = None
    ) -> None:
        await self._fenced(lease, self._SCHEDULE_DELIVERY_RETRY, *astuple(retry))

    async def record_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None:
        await self._fenced(
            lease, self._RECORD_CHUNK, message_id, chunk, platform_message_id, time.time()
        )

    @abstractmethod
    async def _fenced(self, lease: Lease | None, sql: str, *args: Any) -> Any:
        """Run ``sql`` (one of the statements below as the backend writes it) only while
        ``lease`` is held, else raise :class:`LeaseLost`."""

    _MARK_DELIVERED = MARK_DELIVERED
    _MARK_FAILED = MARK_FAILED
    _SCHEDULE_DELIVERY_RETRY = SCHEDULE_DELIVERY_RETRY
    _RECORD_CHUNK = RECORD_CHUNK
    """The writes a lease fences, as :meth:`_fenced` runs them (PostgreSQL: each one
    statement that also checks the lease)."""

    async def answered_message(self, reply_id: int) -> MessageRow | None:
        """The last inbound message a reply answers (what the reply should quote)."""
        rows = await self._messages(
            "WHERE id = (SELECT answers_upto FROM messages WHERE id = ?)", reply_id
        )
        return rows[0] if rows else None

    async def reply_for_platform_message(
        self, chat_key: str, platform_message_id: str
    ) -> MessageRow | None:
        """The reply one of whose chunks is this platform message, if any."""
        rows = await self._messages(
            "WHERE chat_key = ? AND role = 'assistant' AND id IN (SELECT message_id FROM"
            " deliveries WHERE platform_message_id = ?) ORDER BY id DESC LIMIT 1",
            chat_key,
            platform_message_id,
        )
        return rows[0] if rows else None


class SqliteQueue(Queue, SqliteBase):
    """SQLite's fenced writes: the lease checked, then the writes, in one transaction (one
    process writes the file, so nothing takes the lease in between)."""

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
        tokens the reply cost (``usage``) if given (all refused with :class:`LeaseLost` if
        ``lease`` was taken over). Without a session the inbound messages stay out of every
        session's history."""
        queued = queued_reply(reply, inbound_ids, lease)
        values = self._message_values(queued)
        followed = [(self._message_values(m), m.media) for m in follow]

        async def finish(tx: Transaction) -> int:
            await check_lease(tx, lease)
            await tx.write(
                "UPDATE messages SET status = ?, session_id = ?"
                f" WHERE id IN ({marks(inbound_ids)})",
                inbound_status,
                session_id,
                *inbound_ids,
            )
            reply_id = await self._insert_message(tx, values, queued.media)
            assert reply_id is not None  # a reply has no dedup key: it is always recorded
            await tx.write(
                "UPDATE sessions SET last_active_at = ? WHERE id = ?", time.time(), session_id
            )
            if usage is not None:
                await tx.write(ADD_USAGE, *usage.per_partner)
            if usage is not None and usage.group_key is not None:
                await tx.write(ADD_GROUP_TOKENS, *usage.per_group)
            for follow_values, media in followed:
                await self._insert_message(tx, follow_values, media)
            return reply_id

        reply_id = await self._atomically(finish)
        self._stored([reply, *follow])
        return reply_id

    async def count_failed_turn(
        self, message_ids: Sequence[int], *, lease: Lease | None = None
    ) -> int:
        """Count a turn that raised against each of its messages that is still pending; the
        highest count, or 0 when none is pending any more (the turn had recorded its reply)."""
        pending = f"status = 'pending' AND id IN ({marks(message_ids)})"
        async with self._transaction() as tx:
            await check_lease(tx, lease)
            await tx.write(
                f"UPDATE messages SET turn_attempts = turn_attempts + 1 WHERE {pending}",
                *message_ids,
            )
            attempts = await tx.value(
                f"SELECT MAX(turn_attempts) FROM messages WHERE {pending}", *message_ids
            )
        return int(attempts or 0)

    async def close_unanswered(
        self, message_ids: Sequence[int], session_id: str, *, lease: Lease | None = None
    ) -> None:
        """Keep messages in their session's history without a reply (a resting partner)."""
        await self._fenced(
            lease,
            "UPDATE messages SET status = 'done', session_id = ?"
            f" WHERE id IN ({marks(message_ids)})",
            session_id,
            *message_ids,
        )

    async def record_last_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None:
        """:meth:`record_chunk` for a reply's last chunk and :meth:`mark_delivered`, in one
        transaction."""
        sent_at = time.time()

        async def record(tx: Transaction) -> None:
            await check_lease(tx, lease)
            await tx.write(RECORD_CHUNK, message_id, chunk, platform_message_id, sent_at)
            await tx.write(MARK_DELIVERED, message_id)

        await self._atomically(record)

    async def _fenced(self, lease: Lease | None, sql: str, *args: Any) -> None:
        """One write, refused with :class:`LeaseLost` unless ``lease`` is still held (checked
        in the same transaction)."""

        async def write(tx: Transaction) -> None:
            await check_lease(tx, lease)
            await tx.write(sql, *args)

        await self._atomically(write)

    async def waiting_replies(
        self, chat_key: str, before_id: int | None = None
    ) -> list[WaitingReply]:
        """Replies of a chat that wait for a retry (older than ``before_id``), oldest first."""
        rows = await self._sqlite_all(
            "SELECT m.id, m.queue_key, m.partner_id FROM messages m"
            " JOIN delivery_retries r ON r.message_id = m.id"
            " WHERE m.chat_key = ? AND m.id < ? AND m.status = 'delivering' ORDER BY m.id",
            (chat_key, before_id if before_id is not None else 2**63 - 1),
        )
        return [WaitingReply(int(row[0]), row[1], row[2]) for row in rows]
