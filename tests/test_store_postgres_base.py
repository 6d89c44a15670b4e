"""The ground the PostgreSQL store's concerns stand on (bot/store/postgres/base.py), and the
first concern on it, the audit log and settings, held to the same contract on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from bot.store import Store, StoreUnavailable
from bot.store.postgres.audit import Audit
from bot.store.postgres.connection import create_pool
from bot.store.postgres.migrations import migrate
from tests.postgres_server import PostgresServer


async def no_recompute(method: str) -> None:
    raise AssertionError(f"no PostgreSQL step recomputes rows yet, but {method} was called")


@pytest.fixture
async def pool(postgres_database: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await create_pool(postgres_database)
    async with pool.acquire() as db:
        await migrate(db, no_recompute)
    yield pool
    await pool.close()


@pytest.fixture(params=("sqlite", "postgres"))
async def audited(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store | Audit]:
    """The audit log and settings of either backend."""
    if request.param == "sqlite":
        store = await Store.open(tmp_path / "db.sqlite")
        yield store
        await store.close()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    database = await server.create_database()
    pool = await create_pool(server.url(database))
    async with pool.acquire() as db:
        await migrate(db, no_recompute)
    yield Audit(pool)
    await pool.close()
    await server.drop_database(database)


async def test_audit_rows_come_newest_first_and_filter_by_action(audited: Store | Audit) -> None:
    await audited.audit("owner", "bind", chat="g1")
    await audited.audit("user:2", "pairing", code="ABC", nested={"n": 1})
    await audited.audit("owner", "bind", chat="g2")
    rows = await audited.audit_rows()
    assert [(r["actor"], r["action"], r["detail"]) for r in rows] == [
        ("owner", "bind", {"chat": "g2"}),
        ("user:2", "pairing", {"code": "ABC", "nested": {"n": 1}}),
        ("owner", "bind", {"chat": "g1"}),
    ]
    assert [r["detail"]["chat"] for r in await audited.audit_rows("bind", limit=1)] == ["g2"]


async def test_a_setting_is_put_replaced_and_deleted(audited: Store | Audit) -> None:
    await audited.put_setting("memory.review_turns", "3")
    await audited.put_setting("memory.review_turns", "5")
    await audited.put_setting("owner.timezone", "Asia/Tokyo")
    assert await audited.settings() == {
        "memory.review_turns": "5",
        "owner.timezone": "Asia/Tokyo",
    }
    assert await audited.delete_setting("memory.review_turns") is True
    assert await audited.delete_setting("memory.review_turns") is False
    assert await audited.settings() == {"owner.timezone": "Asia/Tokyo"}


async def test_each_statement_counts_as_a_round_trip(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    before = store.round_trips
    await store.audit("owner", "x")
    await store.audit_rows()
    async with store._transaction() as tx:
        await tx.write("DELETE FROM audit")
    assert store.round_trips - before == 5  # two statements, then BEGIN, one, COMMIT


async def test_a_transaction_that_raises_leaves_nothing_behind(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    with pytest.raises(RuntimeError):
        async with store._transaction() as tx:
            await tx.write("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', 0)")
            raise RuntimeError("the turn broke")
    assert await store.settings() == {}


async def test_a_connection_lost_between_calls_is_replaced_unnoticed(
    pool: asyncpg.Pool, postgres_database: str
) -> None:
    store = Audit(pool)
    await store.put_setting("kept", "yes")
    admin = await asyncpg.connect(postgres_database)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await admin.close()
    assert await store.settings() == {"kept": "yes"}


async def test_a_connection_lost_in_a_transaction_is_store_unavailable(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    with pytest.raises(StoreUnavailable):
        async with store._transaction() as tx:
            await tx.write("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', 0)")
            await tx.one("SELECT pg_terminate_backend(pg_backend_pid())")
    assert await store.settings() == {}


async def test_a_mistake_in_our_sql_is_not_an_outage(pool: asyncpg.Pool) -> None:
    store = Audit(pool)
    with pytest.raises(asyncpg.UndefinedTableError):
        await store._all("SELECT * FROM no_such_table")
