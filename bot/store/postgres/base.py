"""What every concern of the PostgreSQL store stands on: a pool of connections (several tasks'
statements run side by side; a transaction holds one connection to itself), every statement
counted as a round trip, and asyncpg's errors for the database's own reasons translated into
the store's (a lost connection, a full disk, a conflict to retry). A mistake in our SQL still
raises as itself: it is a bug, not an outage."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import asyncpg

from bot.store.base import StoreBase, numbered
from bot.store.errors import StoreFull, StoreUnavailable

TRANSIENT = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,  # includes a connection closed under us
    # a pooled connection the server closed while idle, caught before asyncpg noticed
    asyncpg.InternalClientError,
    asyncpg.PostgresConnectionError,
    asyncpg.InsufficientResourcesError,  # too many connections, out of memory
    asyncpg.OperatorInterventionError,  # the server shutting down, a cancelled statement
    asyncpg.TransactionRollbackError,  # serialization failures and deadlocks
)
"""What the database raises for its own reasons: the caller keeps what it has and retries."""


@contextmanager
def translated() -> Iterator[None]:
    """PostgreSQL's outages as the store's own errors."""
    try:
        yield
    except asyncpg.DiskFullError as exc:
        raise StoreFull(f"the database cannot store it ({exc})") from exc
    except TRANSIENT as exc:
        raise StoreUnavailable(f"the database cannot be reached ({exc})") from exc


class PostgresBase(StoreBase):
    """The pool, the round-trip counter and the primitives of :class:`StoreBase` on asyncpg
    (a statement's ``?`` marks become ``$1``, ``$2``, see :func:`numbered`)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__()  # a concern after this one in the store's MRO starts too
        self._pool = pool
        self._round_trips = 0

    @property
    def round_trips(self) -> int:
        """Statements sent to the server so far (bench/turn.py prints them per turn)."""
        return self._round_trips

    async def _all(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        self._round_trips += 1
        with translated():
            return list(await self._pool.fetch(numbered(sql), *args))

    async def _one(self, sql: str, *args: Any) -> asyncpg.Record | None:
        self._round_trips += 1
        with translated():
            return await self._pool.fetchrow(numbered(sql), *args)

    async def _write(self, sql: str, *args: Any, allowed_seconds: float | None = None) -> int:
        """Run one statement; the rows it changed. ``allowed_seconds`` replaces the pool's
        statement timeout for a statement that may rightly take long (maintenance)."""
        self._round_trips += 1
        with translated():
            status = await self._pool.execute(numbered(sql), *args, timeout=allowed_seconds)
        return changed_rows(status)

    async def _value(self, sql: str, *args: Any) -> Any:
        self._round_trips += 1
        with translated():
            return await self._pool.fetchval(numbered(sql), *args)

    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self._transaction() as tx:
                await tx.write_many(sql, rows)

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Transaction]:
        """A transaction on a connection of its own, committed when the block ends (rolled
        back if it raises)."""
        with translated():
            async with self._pool.acquire() as connection, connection.transaction():
                self._round_trips += 2  # BEGIN and COMMIT
                yield Transaction(connection, self)


class Transaction:
    """The statements of one transaction, counted like the store's own."""

    def __init__(self, connection: asyncpg.Connection, store: PostgresBase) -> None:
        self._connection = connection
        self._store = store

    async def all(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        self._store._round_trips += 1
        return list(await self._connection.fetch(numbered(sql), *args))

    async def one(self, sql: str, *args: Any) -> asyncpg.Record | None:
        self._store._round_trips += 1
        return await self._connection.fetchrow(numbered(sql), *args)

    async def value(self, sql: str, *args: Any) -> Any:
        self._store._round_trips += 1
        return await self._connection.fetchval(numbered(sql), *args)

    async def write(self, sql: str, *args: Any) -> int:
        self._store._round_trips += 1
        return changed_rows(await self._connection.execute(numbered(sql), *args))

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement for each of ``rows``, sent together: one round trip."""
        if rows:
            self._store._round_trips += 1
            await self._connection.executemany(numbered(sql), rows)


def changed_rows(status: str) -> int:
    """The row count of a command tag such as ``UPDATE 3`` or ``INSERT 0 1``."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0
