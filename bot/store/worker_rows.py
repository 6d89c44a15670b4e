"""The store's rows for several workers on one database (docs/architecture.md "Several workers"):
a queue key's lease, a Discord shard's lease, the leadership and a worker as the registry knows
it; each epoch fences the writes made under it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lease:
    """A worker's claim on one queue key's pending turns (docs/architecture.md "Several workers"):
    the
    epoch grows with every new holder, so a write under an older epoch is refused."""

    queue_key: str
    worker_id: str
    epoch: int
    expires_at: float
    """When it lapses, on the database's clock (seconds since the epoch)."""


@dataclass(frozen=True)
class ShardLease:
    """A worker's claim on one of the Discord bot's shards (docs/architecture.md "Several workers":
    Discord shards are leases too): only its holder connects that shard. A bot with another
    shard count has other shards, so the count is part of the key; the epoch grows with every
    new holder."""

    shard_count: int
    shard_id: int
    worker_id: str
    epoch: int
    expires_at: float
    """When it lapses unless renewed, on the database's clock."""


@dataclass(frozen=True)
class Leader:
    """The worker elected to run the Telegram poller, the scheduler and command sync; its
    epoch grows with every new leader and fences every leader-only write."""

    worker_id: str
    epoch: int
    expires_at: float
    """When it lapses unless renewed, on the database's clock."""


@dataclass(frozen=True)
class WorkerRow:
    """A gateway worker as the registry knows it (``/admin status``)."""

    worker_id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    leases: int
    """How many queue keys it holds a live lease on."""
    alive: bool | None = None
    """On PostgreSQL, whether its liveness lock is held right now (False: it died or has
    not locked since the server restarted); None where that is not known (SQLite)."""
