"""What the store's concerns are written against once for both backends: a handful of
primitives (rows, one row, one value, a write and its row count, a batch, a transaction) that
SQLite (:mod:`bot.store.connection`, aiosqlite) and PostgreSQL (:mod:`bot.store.postgres.base`,
asyncpg) each provide.

One query text serves both: parameters are written ``?`` (in order) or ``?1``, ``?2`` (by
number, when one is used twice), which SQLite reads as they are and PostgreSQL gets as ``$1``,
``$2`` (:func:`numbered`). A row reads the same on both (``row[0]``, ``row["name"]``,
``dict(row)``). Nothing here imports a driver.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

_MARK = re.compile(r"'(?:[^']|'')*'|\?(\d*)")


class Row(Protocol):
    """A result row: by position or by column name, and ``dict(row)``."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def __len__(self) -> int: ...

    def keys(self) -> Any: ...


class Transaction(Protocol):
    """The statements of one transaction; it commits when its block ends, or rolls back if
    the block raises."""

    async def all(self, sql: str, *args: Any) -> list[Any]: ...

    async def one(self, sql: str, *args: Any) -> Any | None: ...

    async def value(self, sql: str, *args: Any) -> Any: ...

    async def write(self, sql: str, *args: Any) -> int: ...

    async def write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


class StoreBase(ABC):
    """The primitives every concern's SQL runs through; a backend's base provides them."""

    @abstractmethod
    async def _all(self, sql: str, *args: Any) -> list[Any]: ...

    @abstractmethod
    async def _one(self, sql: str, *args: Any) -> Any | None: ...

    async def _value(self, sql: str, *args: Any) -> Any:
        """The first column of the first row, ``None`` when there is no row."""
        row = await self._one(sql, *args)
        return row[0] if row is not None else None

    @abstractmethod
    async def _write(self, sql: str, *args: Any) -> int:
        """Run one statement; the rows it changed."""

    @abstractmethod
    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement for each of ``rows``, in one transaction."""

    @abstractmethod
    def _transaction(self) -> AbstractAsyncContextManager[Transaction]: ...

    async def _atomically(self, body: Callable[[Transaction], Awaitable[T]]) -> T:
        """``body`` as one transaction: committed when it returns, rolled back if it raises.
        ``body`` awaits nothing but its transaction's statements, so SQLite runs it whole on
        the database thread, in one hand-off and one turn of the write lock (the writes every
        turn makes); anything else is a :class:`RuntimeError` there."""
        async with self._transaction() as tx:
            return await body(tx)


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """``sql`` with PostgreSQL's ``$1``, ``$2`` for ``?``/``?N`` (string literals left
    alone); a statement's text is translated once."""
    counter = 0

    def mark(match: re.Match[str]) -> str:
        nonlocal counter
        if match.group(0).startswith("'"):
            return match.group(0)
        if match.group(1):
            return f"${match.group(1)}"
        counter += 1
        return f"${counter}"

    return _MARK.sub(mark, sql)
