"""The one SQLite connection every part of the SQLite store shares (aiosqlite: the standard
library's ``sqlite3`` on a thread of its own, so the event loop never waits on the disk), and
:class:`SqliteBase`, the primitives of :class:`bot.store.base.StoreBase` on it.

Every ``sqlite3`` error the database raises for its own reasons (a full disk, an I/O error, a
lock held too long) leaves as a :class:`StoreUnavailable` (or :class:`StoreFull`); a mistake
in our SQL still raises as itself. One connection serves every task, so writes take turns
under one lock: one task's statement never lands inside another task's transaction. Round
trips are not counted here: a hand-off to the database thread costs microseconds (PostgreSQL,
across a network, counts them).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from bot.store.base import StoreBase, Transaction
from bot.store.errors import StoreFull, StoreUnavailable

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]
"""What runs on the database thread: any number of statements, one hand-off."""


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


def _strpos(text: str | None, part: str | None) -> int | None:
    """PostgreSQL's ``strpos`` (1-based, 0 when absent), so one query text serves both."""
    if text is None or part is None:
        return None
    return text.find(part) + 1


def _reads(sql: str) -> bool:
    """Whether a statement only reads (anything else takes the write lock)."""
    return sql.lstrip()[:6].upper() in ("SELECT", "PRAGMA")


class Connection:
    """The aiosqlite connection, its errors translated."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> Connection:
        # autocommit: the store says BEGIN itself
        db = await aiosqlite.connect(path, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            await db.create_function("strpos", 2, _strpos, deterministic=True)
        except BaseException:
            await db.close()
            raise
        return cls(db)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Cursor:
        with _translated():
            return await self._db.execute(sql, params)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with _translated():
            await self._db.executemany(sql, rows)

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with _translated():
            return list(await self._db.execute_fetchall(sql, params))

    async def executescript(self, script: str) -> None:
        with _translated():
            await self._db.executescript(script)

    async def run(self, work: Work[T]) -> T:
        """Run ``work`` on the database thread with the plain ``sqlite3`` connection: the
        SQLite-only bodies that read several statements at once."""
        with _translated():
            return await self._db._execute(work, self._db._conn)

    async def backup(self, target: Path) -> None:
        """A consistent copy of the live database into ``target`` (SQLite online backup)."""
        dest = await aiosqlite.connect(target)
        try:
            with _translated():
                await self._db.backup(dest)
        finally:
            await dest.close()

    async def close(self) -> None:
        await self._db.close()


class _SqliteTransaction:
    """The statements of one transaction on the shared connection."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    async def all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        return await self._db.execute_fetchall(sql, args)

    async def one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        rows = await self._db.execute_fetchall(sql, args)
        return rows[0] if rows else None

    async def value(self, sql: str, *args: Any) -> Any:
        row = await self.one(sql, *args)
        return row[0] if row is not None else None

    async def write(self, sql: str, *args: Any) -> int:
        return (await self._db.execute(sql, args)).rowcount

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            await self._db.executemany(sql, rows)


class _ThreadTransaction:
    """The statements of a transaction run whole on the database thread
    (:meth:`SqliteBase._atomically`): each completes at once, so the body never suspends."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    async def all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        return self._db.execute(sql, args).fetchall()

    async def one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._db.execute(sql, args).fetchone()
        return row

    async def value(self, sql: str, *args: Any) -> Any:
        row = self._db.execute(sql, args).fetchone()
        return row[0] if row is not None else None

    async def write(self, sql: str, *args: Any) -> int:
        return self._db.execute(sql, args).rowcount

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._db.executemany(sql, rows)


def _to_the_end(body: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine whose every await completes at once (a transaction's body over
    :class:`_ThreadTransaction`) to its end, outside any event loop."""
    try:
        body.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    body.close()
    raise RuntimeError("a transaction's body waited on something other than its statements")


class SqliteBase(StoreBase):
    """What every concern of the SQLite store stands on: the shared connection, the lock
    that keeps one task's statement out of another's transaction, and the primitives."""

    def __init__(self, db: Connection, path: Path) -> None:
        super().__init__()  # a concern after this one in the store's MRO starts too
        self._db = db
        self.path = path
        # One connection is shared by every task: writes take turns so that one task's
        # statement never lands inside (and rolls back with) another task's transaction.
        self._write_lock = asyncio.Lock()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[_SqliteTransaction]:
        """BEGIN IMMEDIATE … COMMIT under the write lock (ROLLBACK if the block raises)."""
        async with self._write_lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTransaction(self._db)
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            await self._db.execute("COMMIT")

    async def _atomically(self, body: Callable[[Transaction], Awaitable[T]]) -> T:
        """``body`` run whole on the database thread: BEGIN, its statements and COMMIT in one
        hand-off, so the write lock is held for one trip to that thread, not one per statement
        (on a busy machine each trip waits for the thread to be scheduled)."""

        def work(db: sqlite3.Connection) -> T:
            step = body(_ThreadTransaction(db))
            assert isinstance(step, Coroutine)  # an ``async def`` body
            return _to_the_end(step)

        return await self._in_one_trip(work)

    def _open_transaction(self) -> _SqliteTransaction:
        """The statements of the transaction a schema step has open (it holds the
        connection alone while the store opens)."""
        return _SqliteTransaction(self._db)

    async def _all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        if _reads(sql):
            return await self._db.execute_fetchall(sql, args)
        # a write that returns rows (RETURNING)
        return await self._one_trip(lambda: self._db.execute_fetchall(sql, args))

    async def _one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        rows = await self._all(sql, *args)
        return rows[0] if rows else None

    async def _write(self, sql: str, *args: Any) -> int:
        return (await self._one_trip(lambda: self._db.execute(sql, args))).rowcount

    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self._transaction() as tx:
                await tx.write_many(sql, rows)

    # SQLite-only helpers of the concerns not yet written once (parameters as one sequence)

    async def _sqlite_all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return await self._db.execute_fetchall(sql, params)

    async def _sqlite_one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self._db.execute_fetchall(sql, params)
        return rows[0] if rows else None

    async def _sqlite_write(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Cursor:
        return await self._one_trip(lambda: self._db.execute(sql, params))

    async def _sqlite_write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._write_many(sql, rows)

    async def _in_one_trip(self, work: Work[T]) -> T:
        """A whole transaction on the database thread, under the write lock."""

        def in_transaction(db: sqlite3.Connection) -> T:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

        return await self._one_trip(lambda: self._db.run(in_transaction))

    async def _one_trip(self, hand_off: Callable[[], Awaitable[T]]) -> T:
        """A write made in one hand-off to the database thread. That thread runs hand-offs
        whole and in the order they were made, so such a write can only land inside a
        transaction that spans several hand-offs (:meth:`_transaction`, which holds the write
        lock from before its BEGIN is handed off until its COMMIT is done): it waits for the
        lock only while someone holds it. Otherwise it is handed off at once, in this step of
        the event loop, ahead of any BEGIN handed off later; writes queue on the thread
        instead of waiting for each other's round trips through the event loop."""
        if self._write_lock.locked():
            async with self._write_lock:
                return await hand_off()
        return await hand_off()
