"""Workers on one database (docs/architecture.md "Several workers"): the registry of running
workers, the
elected leader, the leases on queue keys, each with a fencing epoch, and the scheduled job runs
recorded under the leader's epoch. The leases on the Discord bot's shards are
:mod:`bot.store.shard_leases`.

On SQLite one process holds the data directory's lock, so there is one worker and it always
wins; the statements still mean what PostgreSQL's twin (:mod:`bot.store.postgres.workers`)
means, so the gateway has one code path. Times are the database's clock, never a worker's.

A lease row outlives its holder: releasing one clears its holder and expiry but keeps its
epoch, so the next holder's epoch is always higher than any before it.

The claim on a session's review is a lease too, on the key :func:`review_key` (queue keys
always hold a ``|``, review keys never): the same epochs fence its watermark, the worker's
heartbeat renews it with the worker's other leases, and a dead worker's claim lapses or is
let go with them. A claim is taken only when it is free or lapsed, never again by its own
holder, so one session's review never runs twice at once, even within one worker."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from bot.store.base import Row, StoreBase, Transaction
from bot.store.connection import SqliteBase
from bot.store.errors import LeaseLost
from bot.store.leases import (
    CLAIMABLE,
    HOLDS_LEADERSHIP,
    LEADER,
    LONGEST_WAITING,
    NOW,
    REVIEW_PREFIX,
    Liveness,
    lease_lost,
    let_go,
    review_key,
    waits_for_retry,
)
from bot.store.worker_rows import Leader, Lease, WorkerRow


def check_leadership(db: sqlite3.Connection, leader: Leader) -> None:
    """Inside a leader-only write's transaction: refuse it unless ``leader`` still leads."""
    held = db.execute(HOLDS_LEADERSHIP, (LEADER, leader.worker_id, leader.epoch)).fetchone()
    if held is None:
        raise LeaseLost(f"the leadership of epoch {leader.epoch} was taken over")


def _lease(row: Row) -> Lease:
    return Lease(str(row[0]), str(row[1]), int(row[2]), float(row[3]))


def _claim_free(
    db: sqlite3.Connection, worker_id: str, lease_seconds: float, key: str
) -> Lease | None:
    """Lease one named key (its row made first) unless a lease on it is still running."""
    db.execute(
        "INSERT INTO chat_leases (queue_key, worker_id, epoch, expires_at)"
        " VALUES (?, '', 0, 0) ON CONFLICT (queue_key) DO NOTHING",
        (key,),
    )
    row = db.execute(
        f"UPDATE chat_leases SET worker_id = ?, epoch = epoch + 1, expires_at = {NOW} + ?"
        f" WHERE queue_key = ? AND expires_at <= {NOW}"
        " RETURNING queue_key, worker_id, epoch, expires_at",
        (worker_id, lease_seconds, key),
    ).fetchone()
    return _lease(row) if row else None


class Workers(StoreBase):
    """The worker registry, the leader row and reading a lease, written once for both
    backends (claims, renewals and the heartbeat differ: :class:`SqliteWorkers`,
    :class:`bot.store.postgres.workers.PostgresWorkers`)."""

    _NOW = NOW
    """The database's clock, in the backend's SQL."""
    _LEADER_GONE = ""
    """What else frees the leadership (PostgreSQL: its holder died), as an ``OR`` clause."""
    _ALIVE_COLUMN = ""
    """The registry's column telling whether a worker lives (PostgreSQL: its liveness lock),
    as ``, <expression>``; empty where that is not known."""

    async def register_worker(self, worker_id: str, host: str, pid: int) -> None:
        async def register(tx: Transaction) -> None:
            await tx.write(
                "INSERT INTO workers (worker_id, host, pid, started_at, heartbeat_at)"
                f" VALUES (?, ?, ?, {self._NOW}, {self._NOW}) ON CONFLICT (worker_id) DO UPDATE"
                " SET host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,"
                " heartbeat_at = excluded.heartbeat_at, liveness_key = NULL, liveness_at = NULL,"
                " shard_count = NULL",
                worker_id,
                host,
                pid,
            )
            await let_go(tx, worker_id)  # a worker starting under an id holds nothing yet

        await self._atomically(register)

    async def leave(self, worker_id: str) -> None:
        async def leave(tx: Transaction) -> None:
            await let_go(tx, worker_id)
            await tx.write("DELETE FROM workers WHERE worker_id = ?", worker_id)

        await self._atomically(leave)

    async def workers(self) -> list[WorkerRow]:
        rows = await self._all(
            "SELECT w.worker_id, w.host, w.pid, w.started_at, w.heartbeat_at,"
            " (SELECT count(*) FROM chat_leases l WHERE l.worker_id = w.worker_id"
            f"  AND l.expires_at > {self._NOW} AND l.queue_key NOT LIKE '{REVIEW_PREFIX}%')"
            f"{self._ALIVE_COLUMN} FROM workers w ORDER BY w.started_at, w.worker_id"
        )
        return [
            WorkerRow(
                str(r[0]),
                str(r[1]),
                int(r[2]),
                float(r[3]),
                float(r[4]),
                int(r[5]),
                bool(r[6]) if self._ALIVE_COLUMN else None,
            )  # fmt: skip
            for r in rows
        ]

    async def forget_workers_before(self, heartbeat_at: float) -> int:
        return await self._write("DELETE FROM workers WHERE heartbeat_at < ?", heartbeat_at)

    async def lease(self, queue_key: str) -> Lease | None:
        row = await self._one(
            "SELECT queue_key, worker_id, epoch, expires_at FROM chat_leases WHERE queue_key = ?",
            queue_key,
        )
        return _lease(row) if row else None

    async def lead(self, worker_id: str, lease_seconds: float) -> Leader:
        async def lead(tx: Transaction) -> Leader:
            await tx.write(
                "INSERT INTO leader (name, worker_id, epoch, expires_at)"
                f" VALUES (?, ?, 1, {self._NOW} + ?) ON CONFLICT (name) DO UPDATE SET"
                " epoch = CASE WHEN leader.worker_id = excluded.worker_id"
                f"  AND leader.expires_at > {self._NOW} THEN leader.epoch"
                " ELSE leader.epoch + 1 END,"
                " worker_id = excluded.worker_id, expires_at = excluded.expires_at"
                " WHERE leader.worker_id = excluded.worker_id"
                f" OR leader.expires_at <= {self._NOW}{self._LEADER_GONE}",
                LEADER,
                worker_id,
                lease_seconds,
            )
            row = await tx.one(
                "SELECT worker_id, epoch, expires_at FROM leader WHERE name = ?", LEADER
            )
            assert row is not None  # the statement above made it if there was none
            return Leader(str(row[0]), int(row[1]), float(row[2]))

        return await self._atomically(lead)

    async def leader(self) -> Leader | None:
        row = await self._one(
            "SELECT worker_id, epoch, expires_at FROM leader WHERE name = ?", LEADER
        )
        return Leader(str(row[0]), int(row[1]), float(row[2])) if row else None


class SqliteWorkers(Workers, SqliteBase):
    """Claims, renewals, the heartbeat and job runs on SQLite."""

    async def heartbeat(
        self, worker_id: str, lease_seconds: float, leases: Sequence[Lease]
    ) -> list[Lease]:
        known = {(lease.queue_key, lease.epoch) for lease in leases}

        def beat(db: sqlite3.Connection) -> list[Lease]:
            db.execute(f"UPDATE workers SET heartbeat_at = {NOW} WHERE worker_id = ?", (worker_id,))
            rows = db.execute(
                "SELECT queue_key, epoch FROM chat_leases WHERE worker_id = ?", (worker_id,)
            ).fetchall()
            # rows under this worker's id that it does not know of: nobody works them
            forgotten = [(row[0], row[1]) for row in rows if (row[0], row[1]) not in known]
            db.executemany(
                "UPDATE chat_leases SET worker_id = '', expires_at = 0"
                " WHERE queue_key = ? AND epoch = ?",
                forgotten,
            )
            renewed = db.execute(
                f"UPDATE chat_leases SET expires_at = {NOW} + ? WHERE worker_id = ?"
                " RETURNING queue_key, worker_id, epoch, expires_at",
                (lease_seconds, worker_id),
            ).fetchall()
            return [_lease(row) for row in renewed]

        return await self._in_one_trip(beat)

    # ---- leases --------------------------------------------------------------------------

    async def claim_queue_keys(
        self, worker_id: str, lease_seconds: float, limit: int, queue_key: str | None = None
    ) -> list[Lease]:
        def claim(db: sqlite3.Connection) -> list[Lease]:
            db.execute(
                "INSERT INTO chat_leases (queue_key, worker_id, epoch, expires_at)"
                " SELECT DISTINCT queue_key, '', 0, 0 FROM messages"
                " WHERE status = 'pending' AND queue_key = coalesce(?, queue_key)"
                " ON CONFLICT (queue_key) DO NOTHING",
                (queue_key,),
            )
            rows = db.execute(
                f"UPDATE chat_leases SET worker_id = ?, epoch = epoch + 1,"
                f" expires_at = {NOW} + ? WHERE queue_key IN ("
                f"  SELECT l.queue_key FROM chat_leases l WHERE (l.expires_at <= {NOW}"
                "   OR (? IS NOT NULL AND l.worker_id = ?))"
                f"   AND l.queue_key = coalesce(?, l.queue_key) AND {CLAIMABLE}"
                f"  ORDER BY {LONGEST_WAITING} LIMIT ?)"
                " RETURNING queue_key, worker_id, epoch, expires_at",
                (worker_id, lease_seconds, queue_key, worker_id, queue_key, limit),
            ).fetchall()
            return [_lease(row) for row in rows]

        return await self._in_one_trip(claim)

    async def claim_for_retry(
        self, worker_id: str, lease_seconds: float, queue_key: str, message_id: int
    ) -> Lease | None:
        def claim(db: sqlite3.Connection) -> Lease | None:
            waiting = db.execute(
                f"SELECT {waits_for_retry('?', '?')}", (message_id, queue_key, queue_key)
            ).fetchone()
            return _claim_free(db, worker_id, lease_seconds, queue_key) if waiting[0] else None

        return await self._in_one_trip(claim)

    async def claim_review(
        self, worker_id: str, session_id: str, lease_seconds: float
    ) -> Lease | None:
        key = review_key(session_id)
        return await self._in_one_trip(lambda db: _claim_free(db, worker_id, lease_seconds, key))

    async def claim_due_reviews(
        self, worker_id: str, lease_seconds: float, due_by: float, limit: int
    ) -> list[Lease]:
        def claim(db: sqlite3.Connection) -> list[Lease]:
            db.execute(
                "INSERT INTO chat_leases (queue_key, worker_id, epoch, expires_at)"
                " SELECT ? || id, '', 0, 0 FROM sessions WHERE review_due_at <= ?"
                " ON CONFLICT (queue_key) DO NOTHING",
                (REVIEW_PREFIX, due_by),
            )
            rows = db.execute(
                f"UPDATE chat_leases SET worker_id = ?, epoch = epoch + 1,"
                f" expires_at = {NOW} + ? WHERE queue_key IN ("
                "  SELECT l.queue_key FROM sessions s JOIN chat_leases l"
                "  ON l.queue_key = ? || s.id"
                f"  WHERE s.review_due_at <= ? AND l.expires_at <= {NOW}"
                "  ORDER BY s.review_due_at LIMIT ?)"
                " RETURNING queue_key, worker_id, epoch, expires_at",
                (worker_id, lease_seconds, REVIEW_PREFIX, due_by, limit),
            ).fetchall()
            return [_lease(row) for row in rows]

        return await self._in_one_trip(claim)

    async def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        def renew(db: sqlite3.Connection) -> Lease:
            row = db.execute(
                f"UPDATE chat_leases SET expires_at = {NOW} + ?"
                " WHERE queue_key = ? AND worker_id = ? AND epoch = ?"
                " RETURNING queue_key, worker_id, epoch, expires_at",
                (lease_seconds, lease.queue_key, lease.worker_id, lease.epoch),
            ).fetchone()
            if row is None:
                raise lease_lost(lease)
            return _lease(row)

        return await self._in_one_trip(renew)

    async def release_leases(self, leases: Sequence[Lease]) -> None:
        await self._sqlite_write_many(
            "UPDATE chat_leases SET worker_id = '', expires_at = 0"
            " WHERE queue_key = ? AND worker_id = ? AND epoch = ?",
            [(lease.queue_key, lease.worker_id, lease.epoch) for lease in leases],
        )

    # ---- the leader ----------------------------------------------------------------------

    async def record_job_run(self, job: str, due: str, leader: Leader) -> bool:
        def record(db: sqlite3.Connection) -> bool:
            check_leadership(db, leader)
            cursor = db.execute(
                "INSERT INTO job_runs (job, due, worker_id, leader_epoch, ran_at)"
                f" VALUES (?, ?, ?, ?, {NOW}) ON CONFLICT (job, due) DO NOTHING",
                (job, due, leader.worker_id, leader.epoch),
            )
            return cursor.rowcount > 0

        return await self._in_one_trip(record)

    async def hold_liveness(
        self,
        worker_id: str,  # noqa: ARG002
        wake: Callable[[str], None],  # noqa: ARG002
        lost: Callable[[], None],  # noqa: ARG002
    ) -> Liveness:
        """One process writes a SQLite database: its one worker cannot die unseen by another
        (a restart finds the dead process by its pid) and wakes itself when it stores a
        message, so there is nothing to hold or listen to."""
        return _ALWAYS


class _Alive:
    """The liveness of SQLite's one worker: nothing to hold, never lost."""

    async def check(self) -> bool:
        return True

    async def reopen(self) -> None:
        return None

    async def close(self) -> None:
        return None


_ALWAYS = _Alive()
