"""The leases on the Discord bot's shards (docs/architecture.md "Several workers": Discord
shards are leases too): claimed, renewed and released by a worker, each with a fencing epoch,
and which workers divide a bot's shards between them; reading them is written once, claiming
and renewing on SQLite here (:mod:`bot.store.postgres.shard_leases` on PostgreSQL). One process
holds SQLite's data directory, so its one worker always wins; the statements still mean what
PostgreSQL's mean. A worker that leaves lets its shards go with its
other leases (:mod:`bot.store.workers`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from bot.store.base import Row, StoreBase
from bot.store.connection import SqliteBase
from bot.store.leases import NOW
from bot.store.worker_rows import ShardLease

SHARD_COLUMNS = "shard_count, shard_id, worker_id, epoch, expires_at"


def _shard_lease(row: Row) -> ShardLease:
    return ShardLease(int(row[0]), int(row[1]), str(row[2]), int(row[3]), float(row[4]))


def _shard_leases(rows: Sequence[Row]) -> list[ShardLease]:
    return sorted((_shard_lease(row) for row in rows), key=lambda lease: lease.shard_id)


class ShardLeases(StoreBase):
    """Which leases a bot's shards have, and which workers divide them (written once)."""

    _NOW = NOW
    _LIVE_WORKER = ""
    """A condition on worker ``w`` that it lives, as `` AND <condition>`` (PostgreSQL: its
    liveness lock is held); empty where that is not known."""

    async def shard_leases(self, shard_count: int) -> list[ShardLease]:
        return _shard_leases(
            await self._all(
                f"SELECT {SHARD_COLUMNS} FROM shard_leases WHERE shard_count = ?", shard_count
            )
        )

    async def join_shards(self, worker_id: str, shard_count: int) -> None:
        await self._write(
            "UPDATE workers SET shard_count = ? WHERE worker_id = ?", shard_count, worker_id
        )

    async def shard_workers(self, shard_count: int, within_seconds: float) -> int:
        row = await self._one(
            "SELECT count(*) FROM workers w WHERE w.shard_count = ?"
            f" AND w.heartbeat_at > {self._NOW} - ?{self._LIVE_WORKER}",
            shard_count,
            within_seconds,
        )
        return int(row[0]) if row else 0


class SqliteShardLeases(ShardLeases, SqliteBase):
    """Claiming, renewing and releasing shard leases on SQLite."""

    async def claim_shards(
        self, worker_id: str, shard_count: int, lease_seconds: float, limit: int
    ) -> list[ShardLease]:
        def claim(db: sqlite3.Connection) -> list[ShardLease]:
            db.execute(
                "WITH RECURSIVE ids(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM ids"
                "  WHERE n + 1 < ?)"
                f" INSERT INTO shard_leases ({SHARD_COLUMNS}) SELECT ?, n, '', 0, 0 FROM ids"
                " WHERE true ON CONFLICT (shard_count, shard_id) DO NOTHING",
                (shard_count, shard_count),
            )
            rows = db.execute(
                f"UPDATE shard_leases SET worker_id = ?, epoch = epoch + 1,"
                f" expires_at = {NOW} + ? WHERE shard_count = ? AND shard_id IN ("
                "  SELECT l.shard_id FROM shard_leases l WHERE l.shard_count = ?"
                f"  AND l.expires_at <= {NOW} ORDER BY l.shard_id LIMIT ?)"
                f" RETURNING {SHARD_COLUMNS}",
                (worker_id, lease_seconds, shard_count, shard_count, limit),
            ).fetchall()
            return _shard_leases(rows)

        return await self._in_one_trip(claim)

    async def renew_shards(
        self, worker_id: str, lease_seconds: float, leases: Sequence[ShardLease]
    ) -> list[ShardLease]:
        known = {(lease.shard_count, lease.shard_id, lease.epoch) for lease in leases}

        def renew(db: sqlite3.Connection) -> list[ShardLease]:
            rows = db.execute(
                "SELECT shard_count, shard_id, epoch FROM shard_leases WHERE worker_id = ?",
                (worker_id,),
            ).fetchall()
            # leases under this worker's id that it does not know of: it connects no such shard
            forgotten = [tuple(row) for row in rows if tuple(row) not in known]
            db.executemany(
                "UPDATE shard_leases SET worker_id = '', expires_at = 0"
                " WHERE shard_count = ? AND shard_id = ? AND epoch = ?",
                forgotten,
            )
            renewed = db.execute(
                f"UPDATE shard_leases SET expires_at = {NOW} + ? WHERE worker_id = ?"
                f" RETURNING {SHARD_COLUMNS}",
                (lease_seconds, worker_id),
            ).fetchall()
            return _shard_leases(renewed)

        return await self._in_one_trip(renew)

    async def release_shards(self, leases: Sequence[ShardLease]) -> None:
        await self._sqlite_write_many(
            "UPDATE shard_leases SET worker_id = '', expires_at = 0"
            " WHERE shard_count = ? AND shard_id = ? AND worker_id = ? AND epoch = ?",
            [(s.shard_count, s.shard_id, s.worker_id, s.epoch) for s in leases],
        )
