"""The ground the PostgreSQL store's concerns stand on (bot/store/postgres/base.py): every
statement counted as a round trip, transactions that leave nothing behind when they raise, a
lost connection as StoreUnavailable, and a mistake in our own SQL raised as itself. (What the
concerns do is the store contract, held on both backends: tests/test_store_concerns.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.store import StoreUnavailable
from bot.store.audit import Audit
from bot.store.postgres.base import PostgresBase
from bot.store.postgres.connection import create_pool
from bot.store.postgres.migrations import migrate

HANG_GUARD_SECONDS = 30.0


class PostgresAudit(Audit, PostgresBase):
    """One concern on the PostgreSQL base, as the store composes them."""


async def no_recompute(method: str) -> None:
    raise AssertionError(f"no PostgreSQL step recomputes rows yet, but {method} was called")


@pytest.fixture
async def pool(postgres_database: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(postgres_database)
    async with pool.acquire() as db:
        await migrate(db, no_recompute)
    yield pool
    await pool.close()


async def test_each_statement_counts_as_a_round_trip(pool: asyncpg.Pool) -> None:
    store = PostgresAudit(pool)
    before = store.round_trips
    await store.audit("owner", "x")
    await store.audit_rows()
    async with store._transaction() as tx:
        await tx.write("DELETE FROM audit")
    assert store.round_trips - before == 5  # two statements, then BEGIN, one, COMMIT


async def test_a_transaction_that_raises_leaves_nothing_behind(pool: asyncpg.Pool) -> None:
    store = PostgresAudit(pool)
    with pytest.raises(RuntimeError):
        async with store._transaction() as tx:
            await tx.write("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', 0)")
            raise RuntimeError("the turn broke")
    assert await store.settings() == {}


async def test_connections_lost_between_calls_cost_at_most_one_unavailable_call(
    pool: asyncpg.Pool, postgres_database: str
) -> None:
    store = PostgresAudit(pool)
    await store.put_setting("kept", "yes")
    admin = await asyncpg.connect(postgres_database)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await admin.close()
    # whether the pool noticed the lost connection before handing it out is up to the race
    # with the server's goodbye; either way the caller sees the store's error, and the next
    # call gets a new connection
    try:
        first = await store.settings()
    except StoreUnavailable:
        first = await store.settings()
    assert first == {"kept": "yes"}
    assert await store.settings() == {"kept": "yes"}


async def test_a_connection_lost_in_a_transaction_is_store_unavailable(pool: asyncpg.Pool) -> None:
    store = PostgresAudit(pool)
    with pytest.raises(StoreUnavailable):
        async with store._transaction() as tx:
            await tx.write("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', 0)")
            await tx.one("SELECT pg_terminate_backend(pg_backend_pid())")
    assert await store.settings() == {}


async def test_a_mistake_in_our_sql_is_not_an_outage(pool: asyncpg.Pool) -> None:
    store = PostgresAudit(pool)
    with pytest.raises(asyncpg.UndefinedTableError):
        await store._all("SELECT * FROM no_such_table")


async def test_a_statement_that_hangs_ends_as_store_unavailable_and_the_pool_goes_on(
    postgres_database: str,
) -> None:
    """A statement waiting on something that never comes (here a table another session
    keeps locked) ends after the pool's statement timeout as the store's error, instead of
    stalling its turn for ever, and the pool serves the next call. (The driver also asks the
    server to cancel the statement; that request is its own best effort: a reset of the
    connection that fails meanwhile aborts it, and the statement then waits on the server
    until the lock is free, so this test does not hold the driver to it.)"""
    pool = await create_pool(postgres_database, statement_timeout_seconds=0.5)
    rival = await asyncpg.connect(postgres_database)
    try:
        async with pool.acquire() as db:
            await migrate(db, no_recompute)
        store = PostgresAudit(pool)
        hold = rival.transaction()
        await hold.start()
        await rival.execute("LOCK TABLE settings")
        async with asyncio.timeout(HANG_GUARD_SECONDS):  # the test fails, never hangs
            with pytest.raises(StoreUnavailable):
                await store.put_setting("k", "v")
            await hold.rollback()
            await store.put_setting("k", "again")
            assert await store.settings() == {"k": "again"}
    finally:
        await rival.close()
        await pool.close()
