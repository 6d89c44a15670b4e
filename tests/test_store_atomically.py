"""A transaction given as a body (``StoreBase._atomically``, what every turn's writes use): on
both backends it commits when the body returns and leaves nothing when it raises; on SQLite,
where the body runs whole on the database thread, a body that waits on anything but its own
statements is refused and leaves nothing either."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store import Store
from bot.store.base import StoreBase, Transaction
from bot.store.opening import open_store

NOTE = "INSERT INTO audit (time, actor, action, detail) VALUES (?, 'test', ?, '')"
COUNT = "SELECT COUNT(*) FROM audit WHERE actor = 'test'"


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(tmp_path / "db.sqlite")
    yield opened
    await opened.close()


def base(store: Store) -> StoreBase:
    assert isinstance(store, StoreBase)
    return store


async def test_a_body_commits_when_it_returns_and_answers_its_value(store: Store) -> None:
    async def two_notes(tx: Transaction) -> int:
        await tx.write(NOTE, 1.0, "one")
        await tx.write(NOTE, 2.0, "two")
        return int(await tx.value(COUNT))

    assert await base(store)._atomically(two_notes) == 2
    assert await base(store)._value(COUNT) == 2


async def test_a_body_that_raises_leaves_nothing(store: Store) -> None:
    async def half_then_fail(tx: Transaction) -> None:
        await tx.write(NOTE, 1.0, "one")
        raise ValueError("stop")

    with pytest.raises(ValueError, match="stop"):
        await base(store)._atomically(half_then_fail)
    assert await base(store)._value(COUNT) == 0


async def test_on_sqlite_a_body_that_waits_on_more_than_its_statements_is_refused(
    sqlite_store: Store,
) -> None:
    async def waits(tx: Transaction) -> None:
        await tx.write(NOTE, 1.0, "one")
        await asyncio.sleep(0)  # not the database's: it would hold the write lock meanwhile

    with pytest.raises(RuntimeError, match="waited on something other than its statements"):
        await base(sqlite_store)._atomically(waits)
    assert await base(sqlite_store)._value(COUNT) == 0
    await base(sqlite_store)._write(NOTE, 2.0, "after")  # the connection is usable again
    assert await base(sqlite_store)._value(COUNT) == 1


async def test_on_sqlite_a_write_made_while_a_transaction_is_open_lands_after_it(
    sqlite_store: Store,
) -> None:
    """One-trip writes do not wait for each other, but one made while a transaction of
    several trips is open waits for it: it neither lands inside it nor rolls back with it."""
    store = base(sqlite_store)
    inside, release = asyncio.Event(), asyncio.Event()

    async def rolled_back() -> None:
        async with store._transaction() as tx:
            await tx.write(NOTE, 1.0, "rolled back")
            inside.set()
            await release.wait()
            raise ValueError("undo")

    transaction = asyncio.create_task(rolled_back())
    await inside.wait()
    writes = [asyncio.create_task(store._write(NOTE, 2.0 + n, f"kept {n}")) for n in range(3)]
    release.set()
    with pytest.raises(ValueError, match="undo"):
        await transaction
    await asyncio.gather(*writes)
    rows = await store._all("SELECT action FROM audit WHERE actor = 'test' ORDER BY time")
    assert [row[0] for row in rows] == ["kept 0", "kept 1", "kept 2"]
