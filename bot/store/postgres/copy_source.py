"""The SQLite database a ``companion database copy`` reads from: opened read-only and read in one
snapshot, its schema checked to be this version's, its tables, rows, AUTOINCREMENT marks and
tombstones. Writing them into PostgreSQL is ``bot/store/postgres/copy.py``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bot.store.errors import StoreError
from bot.store.migrations import SCHEMA

SQLITE_ONLY_PREFIXES = ("sqlite_", "message_index")
"""SQLite's own tables and its FTS5 index with its shadow tables: nothing to copy."""


class SourceNotCurrent(StoreError):
    """The SQLite database is not at the schema this version writes."""


def check_current(source: Path, version: int) -> None:
    if version > len(SCHEMA):
        raise SourceNotCurrent(
            f"{source} was written by a newer version (schema {version}); upgrade first"
        )
    if version < len(SCHEMA):
        # migrating it here would change the file this command promises to leave alone
        raise SourceNotCurrent(
            f"{source} is at schema {version}, this version writes {len(SCHEMA)}: start the"
            " gateway on it once (`companion run`, then stop it) to bring it up to date, then"
            " copy again"
        )


class SqliteReader:
    """The SQLite database opened read-only, read in one snapshot on a thread of its own."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> SqliteReader:
        def connect_read_only() -> sqlite3.Connection:
            if not path.is_file():
                raise StoreError(f"no SQLite database at {path}: nothing to copy")
            uri = f"file:{quote(str(path.resolve()))}?mode=ro"
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            db.execute("BEGIN")  # one snapshot from the first read to the last
            return db

        try:
            return cls(await asyncio.to_thread(connect_read_only))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the SQLite database {path}: {exc}") from exc

    async def _fetch(self, sql: str) -> list[Any]:
        try:
            return await asyncio.to_thread(lambda: self._db.execute(sql).fetchall())
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the SQLite database: {exc}") from exc

    async def schema_version(self) -> int:
        return int((await self._fetch("PRAGMA user_version"))[0][0])

    async def tables(self) -> dict[str, list[str]]:
        """The tables that hold the gateway's data and their columns."""
        names = await self._fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
        tables = {}
        for (name,) in names:
            if not name.startswith(SQLITE_ONLY_PREFIXES):
                info = await self._fetch(f'PRAGMA table_info("{name}")')
                tables[name] = [row[1] for row in info]
        return tables

    async def autoincrements(self) -> dict[str, int]:
        """SQLite's AUTOINCREMENT high-water marks (ids it will never hand out again)."""
        exists = await self._fetch(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'"
        )
        if not exists:
            return {}
        return {row[0]: int(row[1]) for row in await self._fetch("SELECT * FROM sqlite_sequence")}

    async def tombstones(self) -> list[tuple[str, str, str]]:
        rows = await self._fetch("SELECT partner_id, user_key, text_hash FROM tombstones")
        return [(str(row[0]), str(row[1]), str(row[2])) for row in rows]

    async def count(self, table: str) -> int:
        return int((await self._fetch(f'SELECT count(*) FROM "{table}"'))[0][0])

    async def rows(
        self, table: str, columns: Sequence[str], batch_rows: int
    ) -> AsyncIterable[list[Any]]:
        """The table's rows in rowid order, ``batch_rows`` at a time."""
        listed = ", ".join(f'"{name}"' if name != "rowid" else name for name in columns)
        cursor = self._db.cursor()
        await asyncio.to_thread(cursor.execute, f'SELECT {listed} FROM "{table}"')
        try:
            while batch := await asyncio.to_thread(cursor.fetchmany, batch_rows):
                yield batch
        finally:
            cursor.close()

    async def close(self) -> None:
        await asyncio.to_thread(self._db.close)


async def read_tombstones(source: Path) -> list[tuple[str, str, str]]:
    """The SQLite database's tombstones (partner, key, hash): what the memory files a copy
    reads beside it must not bring back."""
    reader = await SqliteReader.open(source)
    try:
        return await reader.tombstones()
    finally:
        await reader.close()
