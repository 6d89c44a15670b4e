"""Reading and breaking a worker's liveness on PostgreSQL from outside the gateway: which
server process holds the lock its registry row names (``pg_locks`` shows a two-key advisory
lock with its keys in ``classid``/``objid`` and ``objsubid`` 2), and ending that process the
way kill -9 of the worker, a restart or a network cut ends it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeAlias

import asyncpg

WAIT_SECONDS = 15.0

LIVENESS_HOLDER = (
    "SELECT k.pid FROM pg_locks k JOIN workers w ON k.objid::bigint = w.liveness_key"
    " WHERE w.worker_id = $1 AND k.locktype = 'advisory' AND k.objsubid = 2 AND k.granted"
    " AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)

Database: TypeAlias = asyncpg.Pool | asyncpg.Connection


async def liveness_holder(db: Database, worker_id: str) -> int | None:
    """The server process holding the lock the worker's registry row names, if any."""
    pid = await db.fetchval(LIVENESS_HOLDER, worker_id)
    return int(pid) if pid is not None else None


async def until_liveness_holder(
    db: Database, worker_id: str, wanted: Callable[[int | None], bool], what: str
) -> int | None:
    """The holder, once ``wanted(holder)`` is true: polled, since it is another process's
    state with no event to wait on."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not wanted(holder := await liveness_holder(db, worker_id)):
        if loop.time() > deadline:
            raise AssertionError(f"{worker_id}: timed out after {WAIT_SECONDS:g}s until {what}")
        await asyncio.sleep(0.01)
    return holder


async def drop_liveness_connection(db: Database, worker_id: str) -> int:
    """End the server process of a worker's liveness connection and wait until its lock is
    gone with it; that process's id."""
    pid = await liveness_holder(db, worker_id)
    assert pid is not None, f"{worker_id} holds no liveness lock"
    assert await db.fetchval("SELECT pg_terminate_backend($1)", pid)
    await until_liveness_holder(
        db, worker_id, lambda holder: holder != pid, "its lock went with its process"
    )
    return pid
