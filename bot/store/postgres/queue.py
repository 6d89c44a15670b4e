"""The work queue and delivery on PostgreSQL where its SQL differs (the rest is
:mod:`bot.store.queue`): a turn closes its inbound messages and records its reply in one
statement, and every write that commits a turn's outcome is one statement fenced by the turn's lease
(:func:`~bot.store.postgres.workers.fenced`): the lease row is locked and checked in the same
statement, so it costs no round trip more, and once another worker took the queue key over
the statement writes nothing and the store raises :class:`LeaseLost`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from bot.store.base import numbered
from bot.store.leases import lease_lost
from bot.store.messages import INSERT_INTO_MESSAGES, MESSAGE_VALUES
from bot.store.postgres.messages import PostgresMessages
from bot.store.postgres.workers import FENCED, fenced, lease_values
from bot.store.queue import Queue, queued_reply
from bot.store.rows import NewMessage, NewUsage, WaitingReply
from bot.store.worker_rows import Lease

FINISH_TURN = fenced(
    f"reply AS ({INSERT_INTO_MESSAGES} SELECT {numbered(MESSAGE_VALUES)} FROM fence"
    " ON CONFLICT DO NOTHING RETURNING id),"
    " closed AS (UPDATE messages SET status = $18, session_id = $19"
    f" WHERE id = ANY($20::bigint[]) AND {FENCED}),"
    f" active AS (UPDATE sessions SET last_active_at = $21 WHERE id = $19 AND {FENCED}),"
    " actions AS (INSERT INTO media (message_id, kind, ref, mime, seconds, bytes, filename)"
    " SELECT reply.id, a.kind, a.ref, a.mime, a.seconds, a.bytes, a.filename FROM reply,"
    " unnest($22::text[], $23::text[], $24::text[], $25::float8[], $26::bigint[], $27::text[])"
    " WITH ORDINALITY AS a (kind, ref, mime, seconds, bytes, filename, position)"
    " ORDER BY a.position ON CONFLICT DO NOTHING),"
    " booked AS (INSERT INTO usage AS u (day, partner_id, kind, model, calls, prompt_tokens,"
    " completion_tokens) SELECT $28::text, $29, $30, $31, 1, $32, $33 FROM fence"
    " WHERE $28 IS NOT NULL"
    " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = u.calls + 1,"
    " prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = u.completion_tokens + excluded.completion_tokens),"
    " group_booked AS (INSERT INTO group_usage AS g (group_key, day, tokens)"
    " SELECT $34::text, $35::text, $36 FROM fence WHERE $34 IS NOT NULL"
    " ON CONFLICT (group_key, day) DO UPDATE SET tokens = g.tokens + excluded.tokens)",
    params=36,
    result="(SELECT id FROM reply) AS reply_id, NOT EXISTS (SELECT 1 FROM messages w"
    " JOIN delivery_retries r ON r.message_id = w.id"
    " WHERE w.chat_key = $5 AND w.status = 'delivering') AS none_waiting",
)
"""A turn's outcome in one statement (its parts see one snapshot and commit together, and
only while the turn's lease is held): the reply with its actions, the inbound messages
closed, the session's last activity, and what the reply cost. Parameters: the reply's as
:data:`MESSAGE_VALUES` takes them ($1-$17), the inbound status, session and ids, the time,
the actions' columns as arrays ($22-$27), the usage row ($28-$33, all null for none), the
tokens booked on a scene's group ($34-$36, all null outside a scene) and the lease
($37-$39). It also tells whether any reply of the chat waited for a retry: the delivery
that follows asks that, and is answered without a round trip of its own."""
COUNT_FAILED_TURN = fenced(
    "counted AS (UPDATE messages SET turn_attempts = turn_attempts + 1"
    f" WHERE status = 'pending' AND id = ANY($1::bigint[]) AND {FENCED}"
    " RETURNING turn_attempts)",
    params=1,
    result="(SELECT max(turn_attempts) FROM counted) AS attempts",
)
CLOSE_UNANSWERED = fenced(
    "closed AS (UPDATE messages SET status = 'done', session_id = $1"
    f" WHERE id = ANY($2::bigint[]) AND {FENCED})",
    params=2,
)
MARK_DELIVERED = fenced(
    f"marked AS (UPDATE messages SET status = 'delivered' WHERE id = $1 AND {FENCED})",
    params=1,
)
MARK_FAILED = fenced(
    f"marked AS (UPDATE messages SET status = 'undeliverable' WHERE id = $1 AND {FENCED})",
    params=1,
)
RECORDED = (
    "recorded AS (INSERT INTO deliveries (message_id, chunk, platform_message_id, sent_at)"
    " SELECT $1, $2, $3, $4 FROM fence ON CONFLICT DO NOTHING)"
)
RECORD_CHUNK = fenced(RECORDED, params=4)
RECORD_LAST_CHUNK = fenced(
    f"{RECORDED}, marked AS (UPDATE messages SET status = 'delivered' WHERE id = $1 AND {FENCED})",
    params=4,
)
SCHEDULE_DELIVERY_RETRY = fenced(
    "scheduled AS (INSERT INTO delivery_retries (message_id, attempts, first_failed_at,"
    " next_attempt_at, last_error) SELECT $1, $2, $3, $4, $5 FROM fence"
    " ON CONFLICT (message_id) DO UPDATE SET attempts = excluded.attempts,"
    " first_failed_at = excluded.first_failed_at,"
    " next_attempt_at = excluded.next_attempt_at, last_error = excluded.last_error)",
    params=5,
)


class PostgresQueue(Queue, PostgresMessages):
    """A turn's outcome and each delivered chunk, one fenced statement each."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._none_waiting: dict[str, int] = {}
        """Chat key -> the reply whose recording found none of the chat's replies waiting for
        a retry: the delivery's look at what waits before that reply, answered once from here
        (:meth:`waiting_replies`). A retry stored after that statement is as late for this
        reply as one stored after the look would have been."""

    _MARK_DELIVERED = MARK_DELIVERED
    _MARK_FAILED = MARK_FAILED
    _SCHEDULE_DELIVERY_RETRY = SCHEDULE_DELIVERY_RETRY
    _RECORD_CHUNK = RECORD_CHUNK

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
        """Close the inbound messages and record the reply, with the tokens the reply cost
        (``usage``) if given: one statement, so one transaction and one round trip, refused
        with :class:`LeaseLost` if ``lease`` was taken over. Without a session the inbound
        messages stay out of every session's history. Messages the reply causes
        (``follow``) join its transaction, a statement each."""
        reply = queued_reply(reply, inbound_ids, lease)
        media = reply.media
        args = (
            *self._message_values(reply),
            inbound_status, session_id, list(inbound_ids), time.time(),
            [x.kind for x in media], [x.ref for x in media], [x.mime for x in media],
            [x.seconds for x in media], [x.bytes for x in media], [x.filename for x in media],
            *(usage.per_partner if usage else (None,) * 6),
            *(usage.per_group if usage else (None,) * 3),
        )  # fmt: skip
        if follow:
            row = await self._finish_and_follow(args, follow, lease)
        else:
            row = await self._fenced(lease, FINISH_TURN, *args)
        assert row["reply_id"] is not None  # a reply has no dedup key: it is always recorded
        self._stored([reply])
        reply_id = int(row["reply_id"])
        if row["none_waiting"]:
            self._none_waiting[reply.chat_key] = reply_id
        else:
            self._none_waiting.pop(reply.chat_key, None)
        return reply_id

    async def _finish_and_follow(
        self, args: tuple[Any, ...], follow: Sequence[NewMessage], lease: Lease | None
    ) -> asyncpg.Record:
        """:data:`FINISH_TURN` and the messages that follow the reply, in one transaction."""
        followed = [(self._message_values(m), m.media) for m in follow]
        async with self._transaction() as tx:
            row = await tx.one(FINISH_TURN, *args, *lease_values(lease))
            assert row is not None  # a SELECT without FROM always yields a row
            if lease is not None and not row["held"]:
                raise lease_lost(lease)
            for values, media in followed:
                await self._insert_message(tx, values, media)
        await self._wake_workers(follow)
        self._stored(follow)
        return row

    async def count_failed_turn(
        self, message_ids: Sequence[int], *, lease: Lease | None = None
    ) -> int:
        """Count a turn that raised against each of its messages that is still pending; the
        highest count, or 0 when none is pending any more (the turn had recorded its reply)."""
        row = await self._fenced(lease, COUNT_FAILED_TURN, list(message_ids))
        return int(row["attempts"] or 0)

    async def close_unanswered(
        self, message_ids: Sequence[int], session_id: str, *, lease: Lease | None = None
    ) -> None:
        """Keep messages in their session's history without a reply (a resting partner)."""
        await self._fenced(lease, CLOSE_UNANSWERED, session_id, list(message_ids))

    async def waiting_replies(
        self, chat_key: str, before_id: int | None = None
    ) -> list[WaitingReply]:
        """Replies of a chat that wait for a retry (older than ``before_id``), oldest first.
        The first look after reply ``before_id`` was recorded is answered from its recording
        when that found none waiting (the delivery's look, right after): a retry another key
        stored in between is as late for this reply as one stored just after a look of its
        own (the store's contract: what waited when ``before_id`` was recorded, at least)."""
        if before_id is not None and self._none_waiting.get(chat_key) == before_id:
            del self._none_waiting[chat_key]
            return []
        rows = await self._all(
            "SELECT m.id, m.queue_key, m.partner_id FROM messages m"
            " JOIN delivery_retries r ON r.message_id = m.id"
            " WHERE m.chat_key = $1 AND m.id < $2 AND m.status = 'delivering' ORDER BY m.id",
            chat_key,
            before_id if before_id is not None else 2**63 - 1,
        )
        return [WaitingReply(int(row[0]), row[1], row[2]) for row in rows]

    async def record_last_chunk(
        self,
        message_id: int,
        chunk: int,
        platform_message_id: str | None,
        *,
        lease: Lease | None = None,
    ) -> None:
        """:meth:`record_chunk` for a reply's last chunk and :meth:`mark_delivered`, in one
        statement."""
        await self._fenced(
            lease, RECORD_LAST_CHUNK, message_id, chunk, platform_message_id, time.time()
        )

    async def _fenced(self, lease: Lease | None, sql: str, *args: Any) -> asyncpg.Record:
        """Run a :func:`fenced` statement (``args`` before the lease's values); raise
        :class:`LeaseLost` if it wrote nothing because ``lease`` was taken over."""
        row = await self._one(sql, *args, *lease_values(lease))
        assert row is not None  # a SELECT without FROM always yields a row
        if lease is not None and not row["held"]:
            raise lease_lost(lease)
        return row
