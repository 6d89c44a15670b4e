"""Workers on one PostgreSQL database where it differs from SQLite (the rest is
:mod:`bot.store.workers`, written once): queue-key leases with fencing epochs, the heartbeat,
and job runs recorded under the leader's epoch. The shards' leases are
:mod:`bot.store.postgres.shard_leases`.

Several workers claim at once: a claim locks the lease rows it takes with ``FOR UPDATE SKIP
LOCKED``, so two claimers never get the same key and neither waits for the other. Every time
is ``clock_timestamp()``, the database's clock, so workers with skewed clocks still agree on
when a lease lapsed.

A write a lease fences is one statement (:func:`fenced`): its first common table expression
locks the lease row ``FOR UPDATE`` and every write in it is conditioned on that row, so a
takeover can commit neither between the check and the writes nor unseen while the statement
waits for the lock (PostgreSQL reads the row again once the lock is granted). One statement
is one round trip, where a transaction of a check and a write would be four. A leader-only
write checks the leader row ``FOR SHARE`` in its transaction.

A lease or the leadership whose holder died (its liveness lock is held by nobody, see
:mod:`bot.store.postgres.liveness`) is free at once, like one that lapsed: a claim and
:meth:`Workers.lead` take it under a new epoch, and every heartbeat gives back what dead
workers still held."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import asyncpg

from bot.store.errors import LeaseLost
from bot.store.leases import (
    CLAIMABLE,
    LEADER,
    LONGEST_WAITING,
    REVIEW_PREFIX,
    Liveness,
    lease_lost,
    review_key,
    waits_for_retry,
)
from bot.store.postgres.base import PostgresBase, Transaction
from bot.store.postgres.liveness import GONE, HELD, LivenessConnection
from bot.store.worker_rows import Leader, Lease
from bot.store.workers import Workers

NOW = "extract(epoch FROM clock_timestamp())::double precision"

HOLDS_LEADERSHIP = (
    "SELECT 1 FROM leader WHERE name = $1 AND worker_id = $2 AND epoch = $3 FOR SHARE"
)


FENCED = "EXISTS (SELECT 1 FROM fence)"
"""The condition each write of a :func:`fenced` statement carries (or it selects from
``fence``)."""


def fenced(writes: str, params: int, result: str = "") -> str:
    """One statement that writes only while a lease is held: the common table expressions
    ``writes``, each conditioned on :data:`FENCED` (or selecting ``FROM fence``), after
    ``fence``, which has one row while the lease is held and locks its row until the
    statement commits. The lease is the three parameters after the ``params`` that ``writes``
    takes (:func:`lease_values`; all null: no lease fences the writes). The statement's first
    column ``held`` is false when the lease was lost and nothing was written; ``result`` adds
    more."""
    key, worker, epoch = params + 1, params + 2, params + 3
    return (
        f"WITH lease AS (SELECT 1 FROM chat_leases WHERE queue_key = ${key}"
        f" AND worker_id = ${worker} AND epoch = ${epoch} FOR UPDATE),"
        f" fence AS (SELECT 1 WHERE ${key}::text IS NULL OR EXISTS (SELECT 1 FROM lease)),"
        f" {writes} SELECT {FENCED} AS held" + (f", {result}" if result else "")
    )


def lease_values(lease: Lease | None) -> tuple[str | None, str | None, int | None]:
    """A :func:`fenced` statement's last three parameters."""
    if lease is None:
        return None, None, None
    return lease.queue_key, lease.worker_id, lease.epoch


async def check_leadership(tx: Transaction, leader: Leader) -> None:
    """Inside a leader-only write's transaction: refuse it unless ``leader`` still leads."""
    if await tx.one(HOLDS_LEADERSHIP, LEADER, leader.worker_id, leader.epoch) is None:
        raise LeaseLost(f"the leadership of epoch {leader.epoch} was taken over")


def _lease(row: asyncpg.Record) -> Lease:
    return Lease(row[0], row[1], int(row[2]), float(row[3]))


def _leases(rows: Sequence[asyncpg.Record]) -> list[Lease]:
    return [_lease(row) for row in rows]


async def _claim_free(
    tx: Transaction, worker_id: str, lease_seconds: float, key: str
) -> Lease | None:
    """Lease one named key (its row made first) unless a live worker's lease on it runs."""
    await tx.write(
        "INSERT INTO chat_leases (queue_key, worker_id, epoch, expires_at)"
        " VALUES ($1, '', 0, 0) ON CONFLICT (queue_key) DO NOTHING",
        key,
    )
    row = await tx.one(
        f"UPDATE chat_leases SET worker_id = $1, epoch = epoch + 1,"
        f" expires_at = {NOW} + $2 WHERE queue_key = $3"
        f" AND (expires_at <= {NOW} OR worker_id IN ({GONE}))"
        " RETURNING queue_key, worker_id, epoch, expires_at",
        worker_id,
        lease_seconds,
        key,
    )
    return _lease(row) if row else None


class PostgresWorkers(Workers, PostgresBase):
    """Claims, renewals, the heartbeat and job runs on PostgreSQL; a dead worker's leases
    and leadership are free at once."""

    _NOW = NOW
    _LEADER_GONE = f" OR leader.worker_id IN ({GONE})"
    _ALIVE_COLUMN = f", {HELD}"

    async def heartbeat(
        self, worker_id: str, lease_seconds: float, leases: Sequence[Lease]
    ) -> list[Lease]:
        return _leases(
            await self._all(
                f"WITH beat AS (UPDATE workers SET heartbeat_at = {NOW} WHERE worker_id = $1),"
                " known AS (SELECT * FROM unnest($3::text[], $4::bigint[]) AS k(queue_key, epoch)),"
                f" renewed AS (UPDATE chat_leases l SET expires_at = {NOW} + $2 FROM known k"
                "  WHERE l.queue_key = k.queue_key AND l.epoch = k.epoch AND l.worker_id = $1"
                "  RETURNING l.queue_key, l.worker_id, l.epoch, l.expires_at),"
                # rows under this worker's id that it does not know of: nobody works them
                " forgotten AS (UPDATE chat_leases l SET worker_id = '', expires_at = 0"
                "  WHERE l.worker_id = $1 AND NOT EXISTS (SELECT 1 FROM known k"
                "  WHERE k.queue_key = l.queue_key AND k.epoch = l.epoch)),"
                # what dead workers held, whether or not anything is pending on it
                " orphaned AS (UPDATE chat_leases l SET worker_id = '', expires_at = 0"
                "  WHERE l.queue_key IN (SELECT o.queue_key FROM chat_leases o"
                f"  WHERE o.worker_id <> $1 AND o.worker_id IN ({GONE})"
                "  FOR UPDATE SKIP LOCKED))"
                " SELECT queue_key, worker_id, epoch, expires_at FROM renewed",
                worker_id,
                lease_seconds,
                [lease.queue_key for lease in leases],
                [lease.epoch for lease in leases],
            )
        )

    # ---- leases --------------------------------------------------------------------------

    async def claim_queue_keys(
        self, worker_id: str, lease_seconds: float, limit: int, queue_key: str | None = None
    ) -> list[Lease]:
        # a key seen pending for the first time gets its lease row (epoch 0, free) first, in
        # a statement of its own: the claim below then only ever locks rows that exist
        await self._write(
            "INSERT INTO chat_leases (queue_key, worker_id, epoch, expires_at)"
            " SELECT DISTINCT queue_key, '', 0, 0 FROM messages"
            " WHERE status = 'pending' AND queue_key = coalesce($1, queue_key)"
            " ON CONFLICT (queue_key) DO NOTHING",
            queue_key,
        )
        return _leases(
            await self._all(
                f"UPDATE chat_leases SET worker_id = $1, epoch = epoch + 1,"
                f" expires_at = {NOW} + $2 WHERE queue_key IN ("
                f"  SELECT l.queue_key FROM chat_leases l WHERE (l.expires_at <= {NOW}"
                f"   OR l.worker_id IN ({GONE}) OR ($3::text IS NOT NULL AND l.worker_id = $1))"
                f"   AND l.queue_key = coalesce($3, l.queue_key) AND {CLAIMABLE}"
                f"  ORDER BY {LONGEST_WAITING} LIMIT $4 FOR UPDATE SKIP LOCKED)"
                " RETURNING queue_key, worker_id, epoch, expires_at",
                worker_id,
                lease_seconds,
                queue_key,
                limit,
            )
        )

    async def claim_for_retry(
        self, worker_id: str, lease_seconds: float, queue_key: str, message_id: int
    ) -> Lease | None:
        async with self._transaction() as tx:
            if not await tx.one(
                f"SELECT 1 WHERE {waits_for_retry('$1', '$2')}", message_id, queue_key
            ):
                return None
            return await _claim_free(tx, worker_id, lease_seconds, queue_key)

    async def claim_review(
        self, worker_id: str, session_id: str, lease_seconds: float
    ) -> Lease | None:
        async with self._transaction() as tx:
            return await _claim_free(tx, worker_id, lease_seconds, review_key(session_id))

    async def claim_due_reviews(
        self, worker_id: str, lease_seconds: float, due_by: float, limit: int
    ) -> list[Lease]:
        # the claim rows first, in a statement of their own (as claim_queue_keys does)
        await self._write(
            "INSERT INTO chat_leases (queue_key, worker_id, epoch, expires_at)"
            " SELECT $1 || id, '', 0, 0 FROM sessions WHERE review_due_at <= $2"
            " ON CONFLICT (queue_key) DO NOTHING",
            REVIEW_PREFIX,
            due_by,
        )
        return _leases(
            await self._all(
                f"UPDATE chat_leases SET worker_id = $1, epoch = epoch + 1,"
                f" expires_at = {NOW} + $2 WHERE queue_key IN ("
                "  SELECT l.queue_key FROM sessions s JOIN chat_leases l"
                "  ON l.queue_key = $3 || s.id"
                f"  WHERE s.review_due_at <= $4 AND (l.expires_at <= {NOW}"
                f"   OR l.worker_id IN ({GONE}))"
                "  ORDER BY s.review_due_at LIMIT $5 FOR UPDATE OF l SKIP LOCKED)"
                " RETURNING queue_key, worker_id, epoch, expires_at",
                worker_id,
                lease_seconds,
                REVIEW_PREFIX,
                due_by,
                limit,
            )
        )

    async def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        row = await self._one(
            f"UPDATE chat_leases SET expires_at = {NOW} + $4"
            " WHERE queue_key = $1 AND worker_id = $2 AND epoch = $3"
            " RETURNING queue_key, worker_id, epoch, expires_at",
            lease.queue_key,
            lease.worker_id,
            lease.epoch,
            lease_seconds,
        )
        if row is None:
            raise lease_lost(lease)
        return _lease(row)

    async def release_leases(self, leases: Sequence[Lease]) -> None:
        if not leases:
            return
        await self._write(
            "UPDATE chat_leases l SET worker_id = '', expires_at = 0"
            " FROM unnest($1::text[], $2::text[], $3::bigint[]) AS r(queue_key, worker_id, epoch)"
            " WHERE l.queue_key = r.queue_key AND l.worker_id = r.worker_id"
            " AND l.epoch = r.epoch",
            [lease.queue_key for lease in leases],
            [lease.worker_id for lease in leases],
            [lease.epoch for lease in leases],
        )

    # ---- the leader ----------------------------------------------------------------------

    async def record_job_run(self, job: str, due: str, leader: Leader) -> bool:
        async with self._transaction() as tx:
            await check_leadership(tx, leader)
            return (
                await tx.write(
                    "INSERT INTO job_runs (job, due, worker_id, leader_epoch, ran_at)"
                    f" VALUES ($1, $2, $3, $4, {NOW}) ON CONFLICT (job, due) DO NOTHING",
                    job,
                    due,
                    leader.worker_id,
                    leader.epoch,
                )
                > 0
            )

    async def hold_liveness(
        self, worker_id: str, wake: Callable[[str], None], lost: Callable[[], None]
    ) -> Liveness:
        """A connection of the worker's own that holds its liveness lock (named in its
        registry row, which must exist) and calls ``wake(queue_key)`` whenever any worker
        stores a pending message; ``lost()`` when the connection goes."""
        liveness = LivenessConnection(self._pool, worker_id, wake, lost)
        await liveness.open()
        return liveness
