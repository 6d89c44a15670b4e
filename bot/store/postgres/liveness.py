"""A worker's liveness on PostgreSQL: one connection of its own, held for the worker's whole
life, that holds a session-level advisory lock and listens for pending messages.

A worker killed with SIGKILL cannot give anything back, but the kernel closes its socket, the
server ends its backend and the lock goes with it. So a lease or the leadership whose holder's
lock nobody holds is free at once (:data:`GONE`, used by the claims, the leadership and the
heartbeat), instead of when its expiry lapses. A paused worker (SIGSTOP) keeps its socket and
its lock: what it holds lapses by the clock only, and fencing is what keeps it from writing
afterwards, as before.

The key is random and kept in the worker's registry row (``workers.liveness_key``), not
derived from the worker's id: a worker restarted under a configured id gets a key its
predecessor — perhaps only paused, still connected — does not hold; a worker that never took
a lock (SQLite's, or one started by an older version) has no key and is judged by the clock
alone; and the lock uses the two-key form under its own class (:data:`LIVENESS_CLASS`),
which ``pg_locks`` shows apart from the one-key locks of documents and migrations. The row
also keeps when the lock was taken: a lock taken before the server last started was lost to
the restart, not to the worker's death, so after a restart every worker is judged by the clock
until it locks again (else the first worker back would take every other worker's chats).

``pg_locks`` is readable by every role and shows every database's locks, hence the filter on
this database. A connection pooler in transaction mode cannot keep a session lock: the
liveness connection must be a real session (see docs/workers.md)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable

import asyncpg

from bot.store.errors import StoreUnavailable
from bot.store.postgres.base import translated

LIVENESS_CLASS = 0x636F6D70  # "comp": the first key of every worker's liveness lock
PENDING_CHANNEL = "companion_pending"
"""What the store notifies, with the queue key, once a pending message it stored has
committed (:meth:`bot.store.messages.Messages.add_message`)."""
PROBE_TIMEOUT_SECONDS = 5.0
"""How long the heartbeat's probe of the liveness connection may take before the connection
counts as lost (a half-open link answers nothing)."""
KEY_ATTEMPTS = 5
"""Random keys tried before giving up (another worker holding the same one is a 1 in 2^31
chance each)."""

_NOW = "extract(epoch FROM clock_timestamp())::double precision"

HELD = (
    "EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory'"
    "  AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())"
    f"  AND k.classid = {LIVENESS_CLASS} AND k.objid::bigint = w.liveness_key"
    "  AND k.objsubid = 2 AND k.granted)"
)
"""Whether the registry row ``w``'s liveness lock is held now: its worker lives."""

GONE = (
    "SELECT w.worker_id FROM workers w WHERE w.liveness_key IS NOT NULL"
    " AND w.liveness_at > extract(epoch FROM pg_postmaster_start_time())"
    f" AND NOT {HELD}"
)
"""The workers that died: each took its liveness lock on this server since it started, and
nobody holds that lock now (a subquery for ``worker_id IN (…)``)."""

Wake = Callable[[str], None]
Lost = Callable[[], None]


class LivenessConnection:
    """One worker's connection that holds its liveness lock and hears pending messages
    (:class:`bot.store.workers.Liveness`). It comes from the pool and is never given back
    while the worker runs."""

    def __init__(self, pool: asyncpg.Pool, worker_id: str, wake: Wake, lost: Lost) -> None:
        self._pool = pool
        self.worker_id = worker_id
        self._wake = wake
        self._lost = lost
        self._connection: asyncpg.pool.PoolConnectionProxy | None = None
        self._closing = False

    async def open(self) -> None:
        """Take a connection, lock a new key on it, name the key in the worker's registry
        row and listen. :class:`StoreUnavailable` if the database cannot be reached."""
        with translated():
            connection = await self._pool.acquire()
        try:
            with translated():
                key = await _lock_a_key(connection)
                await connection.execute(
                    f"UPDATE workers SET liveness_key = $2, liveness_at = {_NOW}"
                    " WHERE worker_id = $1",
                    self.worker_id,
                    key,
                )
                await connection.add_listener(PENDING_CHANNEL, self._notified)
        except BaseException:
            await self._give_back(connection)
            raise
        connection.add_termination_listener(self._terminated)
        self._connection = connection

    async def check(self) -> bool:
        """Whether the connection still answers (and so still holds the lock)."""
        connection = self._connection
        if connection is None:
            return False
        try:  # a connection the server closed is released already: that raises too
            with translated():
                await connection.fetchval("SELECT 1", timeout=PROBE_TIMEOUT_SECONDS)
        except StoreUnavailable:
            return False
        return True

    async def reopen(self) -> None:
        """Drop the connection (lost, or not answering) and open a new one with a new key;
        :class:`StoreUnavailable` while the database cannot be reached."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._give_back(connection)
        await self.open()

    async def close(self) -> None:
        """Let the lock go and stop listening."""
        self._closing = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._give_back(connection)

    async def _give_back(self, connection: asyncpg.pool.PoolConnectionProxy) -> None:
        # a connection the server closed went back to the pool by itself: nothing to undo
        with contextlib.suppress(asyncpg.InterfaceError, OSError):
            connection.remove_termination_listener(self._terminated)
            if not connection.is_closed():
                connection.terminate()  # the lock and the listener go now, with the session
            await self._pool.release(connection)

    def _notified(self, _connection: object, _pid: int, _channel: str, queue_key: str) -> None:
        self._wake(queue_key)

    def _terminated(self, _connection: object) -> None:
        if not self._closing:
            self._lost()


async def _lock_a_key(connection: asyncpg.pool.PoolConnectionProxy) -> int:
    """Lock a random positive key of :data:`LIVENESS_CLASS` for this session; the key."""
    for _ in range(KEY_ATTEMPTS):
        key = secrets.randbelow(2**31 - 1) + 1
        if await connection.fetchval("SELECT pg_try_advisory_lock($1, $2)", LIVENESS_CLASS, key):
            return key
    raise StoreUnavailable(f"no free liveness lock after {KEY_ATTEMPTS} random keys")
