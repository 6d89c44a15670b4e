"""The one SQLite connection every part of the SQLite store shares, and the base the store's
concern modules are built on.

:class:`Connection` runs the standard library's ``sqlite3`` on a thread of its own, so the
event loop never waits on the disk. Every hand-off to that thread is a round trip, counted in
``round_trips`` (the figure the store's speed is judged by); :meth:`Connection.transaction`
runs a whole transaction in one. (aiosqlite does the same with one trip per statement and
offers no public way to run several in one.) Every ``sqlite3`` error the database raises for
its own reasons leaves as a :class:`StoreUnavailable` (or :class:`StoreFull`).
:class:`SqliteBase` holds the connection, the write lock and the helpers each concern's SQL
runs through.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from bot.store.errors import StoreFull, StoreUnavailable

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]
"""What runs on the database thread: any number of statements, one round trip."""


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


def _in_transaction(work: Work[T]) -> Work[T]:
    def run(db: sqlite3.Connection) -> T:
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    return run


class Connection:
    """A SQLite connection on a thread of its own that counts its round trips and
    translates its errors."""

    def __init__(self, db: sqlite3.Connection, thread: ThreadPoolExecutor) -> None:
        self._db = db
        self._thread = thread
        self.round_trips = 0
        """Trips to the database thread since the connection opened."""

    @classmethod
    async def open(cls, path: Path) -> Connection:
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite")

        def connect() -> sqlite3.Connection:
            # autocommit: the store says BEGIN itself; the connection lives on its thread
            db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            db.row_factory = sqlite3.Row
            return db

        try:
            db = await asyncio.get_running_loop().run_in_executor(thread, connect)
        except BaseException:
            thread.shutdown(wait=False)
            raise
        return cls(db, thread)

    async def run(self, work: Work[T]) -> T:
        """Run ``work`` on the database thread: one round trip, whatever it does."""
        self.round_trips += 1
        with _translated():
            return await asyncio.get_running_loop().run_in_executor(self._thread, work, self._db)

    async def transaction(self, work: Work[T]) -> T:
        """Run ``work`` inside BEGIN IMMEDIATE … COMMIT (ROLLBACK if it raises), in one
        round trip. The caller holds the store's write lock."""
        return await self.run(_in_transaction(work))

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return await self.run(lambda db: db.execute(sql, params))

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self.run(lambda db: db.executemany(sql, rows))

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return await self.run(lambda db: db.execute(sql, params).fetchall())

    async def executescript(self, script: str) -> None:
        await self.run(lambda db: db.executescript(script))

    async def backup(self, target: Path) -> None:
        """A consistent copy of the live database into ``target`` (SQLite online backup)."""

        def copy(db: sqlite3.Connection) -> None:
            dest = sqlite3.connect(target)
            try:
                db.backup(dest)
            finally:
                dest.close()

        await self.run(copy)

    async def close(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(self._thread, self._db.close)
        finally:
            self._thread.shutdown(wait=False)


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
        """Trips to the database thread so far (bench/turn.py prints them per turn)."""
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

    async def _in_one_trip(self, work: Work[T]) -> T:
        """A whole transaction on the database thread: one round trip."""
        async with self._write_lock:
            return await self._db.transaction(work)

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        async with self._write_lock:
            return await self._db.execute(sql, params)

    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self._transaction():
                await self._db.executemany(sql, rows)
