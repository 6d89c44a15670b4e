"""What the workers' leases mean on every backend, without a driver: the database's clock,
the leader row's name, the SQL naming a key's unfinished replies and its claimable work, the
review claim's key, and what a worker's liveness offers (see :mod:`bot.store.workers`)."""

from __future__ import annotations

from typing import Protocol

from bot.store.base import Transaction
from bot.store.errors import LeaseLost
from bot.store.worker_rows import Leader, Lease

NOW = "((julianday('now') - 2440587.5) * 86400.0)"
"""The database's clock in seconds since the epoch (constant within one statement)."""
LEADER = "gateway"
"""The name of the one leader row."""


class Liveness(Protocol):
    """What :meth:`Workers.hold_liveness` holds for a worker: on PostgreSQL, a connection of
    its own whose lock says the worker lives and which hears other workers' messages."""

    async def check(self) -> bool:
        """Whether the worker's liveness still holds (the connection answers)."""

    async def reopen(self) -> None:
        """Hold it again on a new connection (after it was lost);
        :class:`bot.store.StoreUnavailable` while the database cannot be reached."""

    async def close(self) -> None:
        """Let it go (the worker stops)."""


def unfinished_replies(queue_key: str) -> str:
    """The ids of the replies of a queue key (``queue_key``: SQL naming it) that were recorded but
    not delivered and wait for no retry of their own: a delivery that an outage, a lost lease or a
    dead worker cut off. They keep their key claimable, and its holder finishes them first
    (docs/architecture.md "Nothing stays pending forever"); a reply the platform refused has a
    retry row and is the retry loop's."""
    return (
        f"SELECT u.id FROM messages u WHERE u.queue_key = {queue_key}"
        " AND u.status = 'delivering'"
        " AND NOT EXISTS (SELECT 1 FROM delivery_retries r WHERE r.message_id = u.id)"
    )


def waits_for_retry(message_id: str, queue_key: str) -> str:
    """SQL that is true when reply ``message_id`` waits for a retry (a refused reply still
    being delivered) and is sent under queue key ``queue_key`` (both: SQL naming them): the
    key of the turn that wrote it, or, for one outside every queue (a greeting, a check-in),
    a key of its chat."""
    return (
        "EXISTS (SELECT 1 FROM messages w JOIN delivery_retries r ON r.message_id = w.id"
        f" WHERE w.id = {message_id} AND w.status = 'delivering' AND (w.queue_key = {queue_key}"
        f" OR (w.queue_key IS NULL AND substr({queue_key}, 1, length(w.chat_key) + 1)"
        " = w.chat_key || '|')))"
    )


CLAIMABLE = (
    "(EXISTS (SELECT 1 FROM messages m WHERE m.queue_key = l.queue_key"
    f" AND m.status = 'pending') OR EXISTS ({unfinished_replies('l.queue_key')}))"
)
"""A lease row ``l`` whose key has work: pending messages or an unfinished reply."""
LONGEST_WAITING = (
    "coalesce((SELECT min(m.id) FROM messages m WHERE m.queue_key = l.queue_key"
    " AND m.status = 'pending'), 0), l.queue_key"
)
"""The order keys are claimed in: oldest pending message first (a key with only an unfinished
reply before all), so a worker with room for fewer keys than wait serves them in turn."""
REVIEW_PREFIX = "review:"

HOLDS_LEASE = "SELECT 1 FROM chat_leases WHERE queue_key = ? AND worker_id = ? AND epoch = ?"
HOLDS_LEADERSHIP = "SELECT 1 FROM leader WHERE name = ? AND worker_id = ? AND epoch = ?"


def lease_lost(lease: Lease) -> LeaseLost:
    return LeaseLost(f"the lease on {lease.queue_key} (epoch {lease.epoch}) was taken over")


async def check_lease(tx: Transaction, lease: Lease | None) -> None:
    """Inside a write's transaction: refuse it unless ``lease`` is still held with its epoch
    (None: a write no lease fences, such as the console's own turn)."""
    if lease is None:
        return
    if await tx.one(HOLDS_LEASE, lease.queue_key, lease.worker_id, lease.epoch) is None:
        raise lease_lost(lease)


async def check_leadership(tx: Transaction, leader: Leader, lock: str = "") -> None:
    """Inside a leader-only write's transaction: refuse it unless ``leader`` still leads
    (``lock``: how the backend locks the leader row until the write commits, if it can)."""
    if await tx.one(HOLDS_LEADERSHIP + lock, LEADER, leader.worker_id, leader.epoch) is None:
        raise LeaseLost(f"the leadership of epoch {leader.epoch} was taken over")


async def let_go(tx: Transaction, worker_id: str) -> None:
    """Inside a transaction: release a worker's leases (on shards too) and let its leadership
    lapse (their epochs are kept)."""
    await tx.write(
        "UPDATE chat_leases SET worker_id = '', expires_at = 0 WHERE worker_id = ?", worker_id
    )
    await tx.write(
        "UPDATE shard_leases SET worker_id = '', expires_at = 0 WHERE worker_id = ?", worker_id
    )
    await tx.write(
        "UPDATE leader SET expires_at = 0 WHERE name = ? AND worker_id = ?", LEADER, worker_id
    )


def review_key(session_id: str) -> str:
    """The lease key of a session's review claim."""
    return REVIEW_PREFIX + session_id


def reviewed_session(claim: Lease) -> str:
    """The session a review claim is on."""
    if not claim.queue_key.startswith(REVIEW_PREFIX):
        raise ValueError(f"{claim.queue_key!r} is not a review claim")
    return claim.queue_key.removeprefix(REVIEW_PREFIX)
