"""Copying a SQLite gateway's database into an empty PostgreSQL one (``companion database
copy``), so an owner who outgrew one process keeps every conversation, memory and setting.

The SQLite file is opened read-only and read in one snapshot; the PostgreSQL database is
migrated to the current schema, then filled in ONE transaction, so a copy that fails at any
point leaves it as empty as it was. Rows go over in batches (COPY), never a whole table in
memory. What is copied and what is rebuilt, table by table:

- every table that holds data is copied as it is, ids included, with the target's triggers
  off while it is filled: the rows SQLite's triggers wrote (each message's neighbour terms,
  the audiences searched, the vector log) are copied as they stand instead of written again
  by PostgreSQL's, so nothing a trigger would compute differently (or a second time) creeps
  in. Identity counters then start past the copied ids (and past SQLite's AUTOINCREMENT
  high-water mark, which ``vector_log`` keeps).
- ``search_totals`` (BM25's row count and length, which FTS5 keeps inside its index) is
  rebuilt from the copied terms with the statement the schema step that made it uses.
- ``embedding_skipped`` (PostgreSQL's only) starts empty: the embedder's watermark copied
  from SQLite never waits below a message.
- SQLite's FTS5 index (``message_index`` and its shadow tables) is not copied: PostgreSQL's
  search index is built from the same terms columns as the rows arrive.
- ``media`` and ``seen_updates`` are ordered by rowid on SQLite and by a ``seq`` column on
  PostgreSQL: the rowid becomes the ``seq``.
- memory documents kept as files go into ``documents`` rows when the caller passes them
  (:class:`NewDocument`); a document that is both a row and a file is refused, not guessed.
- ``settings`` rows the caller passes are written last (over a copied row of the same key):
  the records that a namespace's files were read into the database.

At the end the rows of every table are counted on both sides and must agree. Reading the SQLite
side is ``bot/store/postgres/copy_source.py``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg

from bot.store.errors import StoreError
from bot.store.postgres.base import translated
from bot.store.postgres.connection import connect, redacted
from bot.store.postgres.copy_source import SqliteReader, check_current
from bot.store.postgres.store import PostgresStore

BATCH_ROWS = 1000
"""Rows read from SQLite and sent to PostgreSQL at a time."""
DERIVED_TABLES = ("search_totals",)
"""PostgreSQL tables rebuilt from the copied rows rather than copied (SQLite has none)."""
POSTGRES_ONLY_TABLES = ("embedding_skipped",)
"""PostgreSQL tables SQLite has no use for, left empty by a copy: the embedder's skipped
messages past its watermark (SQLite's watermark never waits below a message)."""
ROWID_COLUMNS = {"media": "seq", "seen_updates": "seq"}
"""PostgreSQL columns that hold what SQLite keeps as the rowid (the order rows were stored)."""
REBUILD_SEARCH_TOTALS = (
    "INSERT INTO search_totals (shard, documents, tokens)"
    " SELECT 0, count(*), coalesce(sum(search_length(terms, before_terms, after_terms)), 0)"
    " FROM messages WHERE terms IS NOT NULL"
)


@dataclass(frozen=True)
class NewDocument:
    """A memory document kept as a file, to become a row: its namespace (its root relative
    to the data directory, ``partners/luna``), its path inside it, its bytes and mtime."""

    namespace: str
    path: str
    content: bytes
    updated_at: float


class TargetNotEmpty(StoreError):
    """The PostgreSQL database already holds the gateway's rows."""


@dataclass(frozen=True)
class Column:
    """A PostgreSQL column, and how a SQLite value becomes one of its type."""

    name: str
    convert: Callable[[Any], Any]


async def copy_to_postgres(
    source: Path,
    url: str,
    *,
    documents: AsyncIterable[NewDocument] | None = None,
    settings: Mapping[str, str] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> dict[str, int]:
    """Copy the SQLite database at ``source`` into the empty PostgreSQL database at ``url``
    (migrated first), with ``documents`` as document rows and ``settings`` as settings rows;
    the rows copied per table."""
    reader = await SqliteReader.open(source)
    try:
        version = await reader.schema_version()
        check_current(source, version)
        await (await PostgresStore.open(url)).close()  # migrated to the current schema
        db = await connect(url)
        try:
            with translated():
                return await _copy(reader, db, url, documents, settings or {}, batch_rows)
        finally:
            await db.close()
    finally:
        await reader.close()


async def _copy(
    reader: SqliteReader,
    db: asyncpg.Connection,
    url: str,
    documents: AsyncIterable[NewDocument] | None,
    settings: Mapping[str, str],
    batch_rows: int,
) -> dict[str, int]:
    step = f"preparing {redacted(url)}"
    try:
        async with db.transaction():
            tables = await _target_tables(db)
            await _refuse_unless_empty(db, url, tables)
            _check_same_tables(tables, await reader.tables())
            triggered = await _triggered_tables(db)
            await _set_triggers(db, triggered, "DISABLE")
            copied = {}
            for table, columns in tables.items():
                step = f"copying {table} into {redacted(url)}"
                copied[table] = await _copy_table(reader, db, table, columns, batch_rows)
            step = f"copying memory files into {redacted(url)}"
            files = await _copy_documents(db, documents) if documents is not None else 0
            copied["documents"] += files
            step = f"finishing the copy into {redacted(url)}"
            await _restart_identities(db, await reader.autoincrements())
            await db.execute("DELETE FROM search_totals")
            await db.execute(REBUILD_SEARCH_TOTALS)
            await _set_triggers(db, triggered, "ENABLE")
            await _check_counts(db, reader, copied, files)
            await _put_settings(db, settings)
            return copied
    except (asyncpg.PostgresError, asyncpg.DataError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StoreError(
            f"{step} failed: {reason}; nothing was copied (the database is as empty as before)"
        ) from exc


async def _target_tables(db: asyncpg.Connection) -> dict[str, list[Column]]:
    """The gateway's tables on PostgreSQL and their columns, with how a SQLite value
    becomes the column's type; the schema's own bookkeeping and derived tables left out."""
    rows = await db.fetch(
        "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c"
        " JOIN information_schema.tables t ON t.table_schema = c.table_schema"
        " AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'"
        " WHERE c.table_schema = current_schema() ORDER BY c.table_name, c.ordinal_position"
    )
    tables: dict[str, list[Column]] = {}
    for row in rows:
        if row[0] in ("schema_version", *DERIVED_TABLES, *POSTGRES_ONLY_TABLES):
            continue
        tables.setdefault(row[0], []).append(Column(row[1], _converter(row[2])))
    return tables


def _converter(data_type: str) -> Callable[[Any], Any]:
    """SQLite keeps what its column affinity lets it: a whole number in a REAL column, text
    in a BLOB one (a row written by hand); PostgreSQL's COPY wants the column's own type."""
    if data_type == "double precision":
        return lambda value: float(value) if isinstance(value, int) else value
    if data_type == "bytea":
        return lambda value: value.encode("utf-8") if isinstance(value, str) else value
    return lambda value: value


async def _refuse_unless_empty(
    db: asyncpg.Connection, url: str, tables: dict[str, list[Column]]
) -> None:
    holding = [name for name in tables if await db.fetchval(f'SELECT EXISTS (TABLE "{name}")')]
    if holding:
        raise TargetNotEmpty(
            f"{redacted(url)} is not an empty database: it holds rows in {', '.join(holding)}."
            " Copy into a new database (for example `createdb companion`) or one whose"
            " gateway tables are empty; the copy never writes over rows"
        )


def _check_same_tables(tables: dict[str, list[Column]], sources: dict[str, list[str]]) -> None:
    """Both databases have the same tables and columns (at one schema version they do); a
    difference would lose data, so it stops the copy."""
    missing = sorted(set(sources) - set(tables))
    if missing:
        raise StoreError(f"PostgreSQL has no table for {', '.join(missing)}; nothing was copied")
    for table, columns in tables.items():
        names = {column.name for column in columns} - {ROWID_COLUMNS.get(table)}
        lost = sorted(set(sources.get(table, [])) - names)
        absent = sorted(names - set(sources.get(table, [])))
        if lost or absent or table not in sources:
            raise StoreError(
                f"the table {table} differs between the databases (SQLite only: {lost},"
                f" PostgreSQL only: {absent}); nothing was copied"
            )


async def _triggered_tables(db: asyncpg.Connection) -> list[str]:
    rows = await db.fetch(
        "SELECT DISTINCT event_object_table FROM information_schema.triggers"
        " WHERE trigger_schema = current_schema() ORDER BY 1"
    )
    return [row[0] for row in rows]


async def _set_triggers(db: asyncpg.Connection, tables: list[str], state: str) -> None:
    """Turn the tables' own triggers off (``DISABLE``) or back on (``ENABLE``), inside the
    copy's transaction (the table's owner may; the lock it takes keeps workers out)."""
    for table in tables:
        await db.execute(f'ALTER TABLE "{table}" {state} TRIGGER USER')


async def _copy_table(
    reader: SqliteReader,
    db: asyncpg.Connection,
    table: str,
    columns: list[Column],
    batch_rows: int,
) -> int:
    """One table's rows, a batch at a time; how many."""
    rowid = ROWID_COLUMNS.get(table)
    selected = ["rowid" if column.name == rowid else column.name for column in columns]
    copied = 0
    async for batch in reader.rows(table, selected, batch_rows):
        records = [
            tuple(column.convert(value) for column, value in zip(columns, row, strict=True))
            for row in batch
        ]
        await db.copy_records_to_table(
            table, records=records, columns=[column.name for column in columns]
        )
        copied += len(records)
    return copied


async def _copy_documents(db: asyncpg.Connection, documents: AsyncIterable[NewDocument]) -> int:
    copied = 0
    async for document in documents:
        try:
            await db.execute(
                "INSERT INTO documents (namespace, path, content, version, updated_at)"
                " VALUES ($1, $2, $3, 1, $4)",
                document.namespace,
                document.path,
                document.content,
                document.updated_at,
            )
        except asyncpg.UniqueViolationError:
            raise StoreError(
                f"{document.namespace}/{document.path} is both a row of the SQLite database"
                ' (written while [storage] documents was "database") and a file in the data'
                " directory, and the copy cannot tell which is current; nothing was copied. To"
                ' copy the rows, set [storage] documents = "database" (the files stay behind);'
                " to copy the files, take a `companion backup`, then delete the rows"
                ' (sqlite3 gateway.db "DELETE FROM documents") and copy again'
            ) from None
        copied += 1
    return copied


async def _put_settings(db: asyncpg.Connection, settings: Mapping[str, str]) -> None:
    now = time.time()
    for key, value in settings.items():
        await db.execute(
            "INSERT INTO settings (key, value, updated_at) VALUES ($1, $2, $3)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at",
            key,
            value,
            now,
        )


async def _restart_identities(db: asyncpg.Connection, autoincrements: dict[str, int]) -> None:
    """Every identity counter past the highest id copied (and SQLite's AUTOINCREMENT mark):
    the next row stored gets a new number."""
    identities = await db.fetch(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES'"
    )
    for table, column in identities:
        highest = await db.fetchval(f'SELECT max("{column}") FROM "{table}"')
        highest = max(highest or 0, autoincrements.get(table, 0))
        if highest:
            await db.execute(
                "SELECT setval(pg_get_serial_sequence($1, $2), $3)",
                f'"{table}"',
                column,
                highest,
            )


async def _check_counts(
    db: asyncpg.Connection, reader: SqliteReader, copied: dict[str, int], files: int
) -> None:
    """Each table holds as many rows as SQLite's (documents: and the files'): else no
    commit."""
    for table, count in copied.items():
        expected = await reader.count(table) + (files if table == "documents" else 0)
        stored = await db.fetchval(f'SELECT count(*) FROM "{table}"')
        if not expected == count == stored:
            raise StoreError(
                f"{table}: SQLite holds {expected} rows, {count} were sent and PostgreSQL"
                f" holds {stored}; nothing was copied"
            )
