"""The one SQLite connection every part of the SQLite store shares, and the base the store's
concern modules are built on.

:class:`Connection` wraps aiosqlite so that every trip to the database thread is counted
(``round_trips``: the figure the store's speed is judged by, since each trip costs a thread
hand-off) and every ``sqlite3`` error the database raises for its own reasons leaves as a
:class:`StoreUnavailable` (or :class:`StoreFull`). :class:`SqliteBase` holds the connection,
the write lock and the small helpers each concern's SQL runs through.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiosqlite

from bot.store.errors import StoreFull, StoreUnavailable


@contextmanager
def _translated() -> Iterator[None]:
    """SQLite's operational errors (disk full, I/O error, busy) as the store's own."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL:
            raise StoreFull(f"the database cannot store it ({exc})") from exc
        raise StoreUnavailable(f"the database cannot store it ({exc})") from exc


def statements(script: str) -> list[str]:
    """A script's statements, for running them one by one (a trigger body holds ';' of its
    own, so sqlite3.complete_statement decides where each ends)."""
    found, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    return [s for s in found if s]


class Connection:
    """An aiosqlite connection that counts its round trips and translates its errors."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self.round_trips = 0
        """Trips to the database thread since the connection opened."""

    @classmethod
    async def open(cls, path: Path) -> Connection:
        db = await aiosqlite.connect(path, isolation_level=None)
        db.row_factory = aiosqlite.Row
        return cls(db)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Cursor:
        self.round_trips += 1
        with _translated():
            return await self._db.execute(sql, params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.round_trips += 1
        with _translated():
            await self._db.executemany(sql, rows)

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        self.round_trips += 1
        with _translated():
            return list(await self._db.execute_fetchall(sql, params))

    async def executescript(self, script: str) -> None:
        self.round_trips += 1
        with _translated():
            await self._db.executescript(script)

    async def backup(self, target: Path) -> None:
        """A consistent copy of the live database into ``target`` (SQLite online backup)."""
        dest = await aiosqlite.connect(target)
        try:
            self.round_trips += 1
            with _translated():
                await self._db.backup(dest)
        finally:
            await dest.close()

    async def close(self) -> None:
        await self._db.close()


class SqliteBase:
    """What every concern of the SQLite store stands on: the shared connection, the lock
    that keeps one task's statement out of another's transaction, and query helpers."""

    def __init__(self, db: Connection, path: Path) -> None:
        self._db = db
        self.path = path
        # One connection is shared by every task: writes take turns so that one task's
        # statement never lands inside (and rolls back with) another task's transaction.
        self._write_lock = asyncio.Lock()

    @property
    def round_trips(self) -> int:
        """Trips to the database thread so far (bench/store_round_trips.py reads it)."""
        return self._db.round_trips

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        async with self._write_lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            await self._db.execute("COMMIT")

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """One round trip to the database thread for a whole result."""
        return await self._db.execute_fetchall(sql, params)

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Cursor:
        async with self._write_lock:
            return await self._db.execute(sql, params)

    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self._transaction():
                await self._db.executemany(sql, rows)
