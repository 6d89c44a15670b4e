"""Claiming, renewing and releasing the Discord bot's shard leases on PostgreSQL (the rest is
:mod:`bot.store.shard_leases`, written once): several workers claim at once with ``FOR UPDATE
SKIP LOCKED``, a dead worker's shards (its liveness lock held by nobody) are free at once, and
the workers that divide a bot's shards are the live ones that joined it."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from bot.store.postgres.base import PostgresBase
from bot.store.postgres.liveness import GONE
from bot.store.postgres.workers import NOW
from bot.store.shard_leases import SHARD_COLUMNS, ShardLeases
from bot.store.worker_rows import ShardLease


def _shard_leases(rows: Sequence[asyncpg.Record]) -> list[ShardLease]:
    leases = [ShardLease(int(r[0]), int(r[1]), r[2], int(r[3]), float(r[4])) for r in rows]
    return sorted(leases, key=lambda lease: lease.shard_id)


class PostgresShardLeases(ShardLeases, PostgresBase):
    _NOW = NOW
    _LIVE_WORKER = f" AND w.worker_id NOT IN ({GONE})"

    async def claim_shards(
        self, worker_id: str, shard_count: int, lease_seconds: float, limit: int
    ) -> list[ShardLease]:
        # the rows first, in a statement of their own (as claim_queue_keys does)
        await self._write(
            f"INSERT INTO shard_leases ({SHARD_COLUMNS})"
            " SELECT $1, n, '', 0, 0 FROM generate_series(0, $1 - 1) AS n"
            " ON CONFLICT (shard_count, shard_id) DO NOTHING",
            shard_count,
        )
        return _shard_leases(
            await self._all(
                f"UPDATE shard_leases SET worker_id = $1, epoch = epoch + 1,"
                f" expires_at = {NOW} + $2 WHERE shard_count = $3 AND shard_id IN ("
                "  SELECT l.shard_id FROM shard_leases l WHERE l.shard_count = $3"
                f"  AND (l.expires_at <= {NOW} OR l.worker_id IN ({GONE}))"
                "  ORDER BY l.shard_id LIMIT $4 FOR UPDATE SKIP LOCKED)"
                f" RETURNING {SHARD_COLUMNS}",
                worker_id,
                lease_seconds,
                shard_count,
                limit,
            )
        )

    async def renew_shards(
        self, worker_id: str, lease_seconds: float, leases: Sequence[ShardLease]
    ) -> list[ShardLease]:
        return _shard_leases(
            await self._all(
                "WITH known AS (SELECT * FROM unnest($3::bigint[], $4::bigint[], $5::bigint[])"
                "  AS k(shard_count, shard_id, epoch)),"
                f" renewed AS (UPDATE shard_leases l SET expires_at = {NOW} + $2 FROM known k"
                "  WHERE l.shard_count = k.shard_count AND l.shard_id = k.shard_id"
                "  AND l.epoch = k.epoch AND l.worker_id = $1"
                "  RETURNING l.shard_count, l.shard_id, l.worker_id, l.epoch, l.expires_at),"
                # leases under this worker's id that it does not know of: it connects no such
                # shard
                " forgotten AS (UPDATE shard_leases l SET worker_id = '', expires_at = 0"
                "  WHERE l.worker_id = $1 AND NOT EXISTS (SELECT 1 FROM known k"
                "  WHERE k.shard_count = l.shard_count AND k.shard_id = l.shard_id"
                "  AND k.epoch = l.epoch))"
                f" SELECT {SHARD_COLUMNS} FROM renewed",
                worker_id,
                lease_seconds,
                [lease.shard_count for lease in leases],
                [lease.shard_id for lease in leases],
                [lease.epoch for lease in leases],
            )
        )

    async def release_shards(self, leases: Sequence[ShardLease]) -> None:
        if not leases:
            return
        await self._write(
            "UPDATE shard_leases l SET worker_id = '', expires_at = 0"
            " FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[])"
            "  AS r(shard_count, shard_id, worker_id, epoch)"
            " WHERE l.shard_count = r.shard_count AND l.shard_id = r.shard_id"
            " AND l.worker_id = r.worker_id AND l.epoch = r.epoch",
            [lease.shard_count for lease in leases],
            [lease.shard_id for lease in leases],
            [lease.worker_id for lease in leases],
            [lease.epoch for lease in leases],
        )
