"""The schema steps of :mod:`bot.store.migrations` applied to a PostgreSQL database, each in a
transaction of its own and recorded in ``schema_version``. Several workers may open the same
database at once: a transaction-scoped advisory lock lets one apply a step while the others
wait, then find it applied."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import asyncpg

from bot.store.errors import StoreError
from bot.store.migrations import SCHEMA, Migration, for_dialect

MIGRATION_LOCK = 0x636F6D70616E  # "compan": the advisory lock key of schema changes
CREATE_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version BIGINT PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
)
Recompute = Callable[[str], Awaitable[None]]
"""Runs the Store method a :class:`Migration` names (rows recomputed in Python)."""


async def schema_version(db: asyncpg.Connection) -> int:
    """How many schema steps the database has applied (0 for an empty database)."""
    exists = await db.fetchval("SELECT to_regclass('schema_version') IS NOT NULL")
    if not exists:
        return 0
    return int(await db.fetchval("SELECT coalesce(max(version), 0) FROM schema_version"))


async def migrate(db: asyncpg.Connection, recompute: Recompute) -> None:
    """Bring the database to the current schema; refuse one written by a newer version."""
    while await _apply_next_step(db, recompute):
        pass


async def _apply_next_step(db: asyncpg.Connection, recompute: Recompute) -> bool:
    """Apply the first step the database lacks; False when it lacks none."""
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        await db.execute(CREATE_VERSION_TABLE)
        version = await schema_version(db)
        if version > len(SCHEMA):
            raise StoreError(
                f"the database was written by a newer version (schema {version}); upgrade first"
            )
        if version == len(SCHEMA):
            return False
        step = for_dialect(SCHEMA[version], "postgres")
        if isinstance(step, Migration):
            await db.execute(step.sql)
            await recompute(step.then)
            if step.after:
                await db.execute(step.after)
        else:
            await db.execute(step)
        await db.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)",
            version + 1,
            time.time(),
        )
        return True
