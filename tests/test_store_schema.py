"""One list of schema steps for both databases (bot/store/migrations/): a new PostgreSQL database
gets the tables, columns, indexes and trigger behaviour a new SQLite database has, in
PostgreSQL's words; several workers may migrate it at once; a newer one is refused."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from bot.store import SCHEMA, StoreError
from bot.store.opening import open_store
from bot.store.postgres.connection import connect, redacted
from bot.store.postgres.migrations import migrate, schema_version
from tests.postgres_server import PostgresServer

SQLITE_TYPES = {"TEXT": "text", "INTEGER": "bigint", "REAL": "double precision", "BLOB": "bytea"}
SQLITE_ONLY_TABLES = ("message_index", "sqlite_sequence")
"""The FTS5 index and its shadow tables, and SQLite's own counter table for AUTOINCREMENT
keys."""
POSTGRES_ONLY_TABLES = {"search_totals", "embedding_skipped"}
"""BM25's totals, which FTS5 keeps inside its index (bot/store/postgres/search.py), and the
embedder's skipped messages past a watermark that waits (bot/store/postgres/vectors.py)."""
POSTGRES_ONLY_COLUMNS = {("media", "seq"), ("seen_updates", "seq")}
"""The order rows were stored in, which SQLite reads from rowid."""
POSTGRES_ONLY_INDEXES = {"messages_search"}
"""The GIN index over the search terms, PostgreSQL's twin of the FTS5 table."""


async def no_recompute(method: str) -> None:
    raise AssertionError(f"no PostgreSQL step recomputes rows yet, but {method} was called")


@pytest.fixture
async def pg(postgres_database: str) -> AsyncIterator[asyncpg.Connection]:
    db = await connect(postgres_database)
    await migrate(db, no_recompute)
    yield db
    await db.close()


def sqlite_layout(path: Path) -> tuple[dict[str, dict[str, str]], set[str]]:
    db = sqlite3.connect(path)
    try:
        tables = [
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith(SQLITE_ONLY_TABLES)
        ]
        columns = {
            table: {
                row[1]: SQLITE_TYPES[row[2]] for row in db.execute(f"PRAGMA table_info({table})")
            }
            for table in tables
        }
        indexes = {
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index'"
                " AND name NOT LIKE 'sqlite_autoindex%'"
            )
        }
    finally:
        db.close()
    return columns, indexes


async def postgres_layout(db: asyncpg.Connection) -> tuple[dict[str, dict[str, str]], set[str]]:
    columns: dict[str, dict[str, str]] = {}
    for row in await db.fetch(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name != 'schema_version'"
    ):
        columns.setdefault(row["table_name"], {})[row["column_name"]] = row["data_type"]
    for table, column in POSTGRES_ONLY_COLUMNS:
        del columns[table][column]
    for table in POSTGRES_ONLY_TABLES:
        del columns[table]
    indexes = {
        row["indexname"]
        for row in await db.fetch(
            "SELECT i.indexname FROM pg_indexes i WHERE i.schemaname = 'public'"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)"
        )
    }
    return columns, indexes - POSTGRES_ONLY_INDEXES


async def test_postgres_gets_the_tables_columns_and_indexes_sqlite_has(
    pg: asyncpg.Connection, tmp_path: Path
) -> None:
    store = await open_store(tmp_path / "db.sqlite")
    await store.close()
    sqlite_columns, sqlite_indexes = sqlite_layout(tmp_path / "db.sqlite")
    postgres_columns, postgres_indexes = await postgres_layout(pg)
    assert postgres_columns == sqlite_columns
    assert postgres_indexes == sqlite_indexes
    assert await schema_version(pg) == len(SCHEMA)


async def test_migrating_again_changes_nothing_and_keeps_the_rows(pg: asyncpg.Connection) -> None:
    await pg.execute(
        "INSERT INTO audit (time, actor, action, detail) VALUES (1.5, 'owner', 'kept', '')"
    )
    await migrate(pg, no_recompute)
    assert await schema_version(pg) == len(SCHEMA)
    assert await pg.fetchval("SELECT count(*) FROM schema_version") == len(SCHEMA)
    assert await pg.fetchval("SELECT action FROM audit") == "kept"


async def test_a_database_of_a_newer_version_is_refused(pg: asyncpg.Connection) -> None:
    await pg.execute(
        "INSERT INTO schema_version (version, applied_at) VALUES ($1, 0)", len(SCHEMA) + 1
    )
    with pytest.raises(StoreError, match=f"newer version \\(schema {len(SCHEMA) + 1}\\)"):
        await migrate(pg, no_recompute)


async def test_workers_migrating_one_database_at_once_apply_each_step_once(
    postgres_database: str,
) -> None:
    workers = [await connect(postgres_database) for _ in range(3)]
    try:
        await asyncio.gather(*(migrate(db, no_recompute) for db in workers))
        versions = [row[0] for row in await workers[0].fetch("SELECT version FROM schema_version")]
    finally:
        for db in workers:
            await db.close()
    assert sorted(versions) == list(range(1, len(SCHEMA) + 1))


async def test_timestamps_keep_their_precision(pg: asyncpg.Connection) -> None:
    now = time.time()
    await pg.execute(
        "INSERT INTO audit (time, actor, action, detail) VALUES ($1, 'owner', 'x', '')", now
    )
    assert await pg.fetchval("SELECT time FROM audit") == now


async def add_message(
    db: asyncpg.Connection, text: str, terms: str | None = None, status: str = "done"
) -> int:
    return int(
        await db.fetchval(
            "INSERT INTO messages (chat_key, partner_id, role, text, audience, status,"
            " created_at, terms, scope) VALUES ('dm:a', 'p', 'user', $1, 'user:a', $2, 1.0,"
            " $3, CASE WHEN $3::text IS NULL THEN NULL ELSE 'scope-a' END) RETURNING id",
            text,
            status,
            terms,
        )
    )


async def test_a_deleted_message_takes_its_media_vector_and_redo_mark_with_it(
    pg: asyncpg.Connection,
) -> None:
    message = await add_message(pg, "a photo", terms="photo")
    await pg.execute(
        "INSERT INTO media (message_id, kind, ref) VALUES ($1, 'photo', 'f1')", message
    )
    await pg.execute(
        "INSERT INTO message_vectors (message_id, model, dim, scope, vector)"
        " VALUES ($1, 'm', 2, 'scope-a', $2)",
        message,
        b"\x00" * 8,
    )
    await pg.execute("INSERT INTO embedding_redo (message_id) VALUES ($1)", message)
    await pg.execute("DELETE FROM messages WHERE id = $1", message)
    for table in ("media", "message_vectors", "embedding_redo"):
        assert await pg.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_a_changed_text_drops_the_vector_and_asks_for_a_new_one(
    pg: asyncpg.Connection,
) -> None:
    changed = await add_message(pg, "[voice message]", terms="voice")
    unsearchable = await add_message(pg, "a notice")
    unchanged = await add_message(pg, "kept as it was", terms="kept")
    for row in (changed, unsearchable, unchanged):
        await pg.execute(
            "INSERT INTO message_vectors (message_id, model, dim, scope, vector)"
            " VALUES ($1, 'm', 2, 'scope-a', $2)",
            row,
            b"\x00" * 8,
        )
    await pg.execute("UPDATE messages SET text = 'the transcript' WHERE id = $1", changed)
    await pg.execute("UPDATE messages SET text = 'another notice' WHERE id = $1", unsearchable)
    await pg.execute("UPDATE messages SET text = text WHERE id = $1", unchanged)
    assert await pg.fetchval("SELECT array_agg(message_id) FROM message_vectors") == [unchanged]
    assert await pg.fetchval("SELECT array_agg(message_id) FROM embedding_redo") == [changed]


async def test_a_reply_that_stops_delivering_loses_its_retry(pg: asyncpg.Connection) -> None:
    settled = await add_message(pg, "reply one", status="delivering")
    removed = await add_message(pg, "reply two", status="delivering")
    waiting = await add_message(pg, "reply three", status="delivering")
    for row in (settled, removed, waiting):
        await pg.execute(
            "INSERT INTO delivery_retries (message_id, attempts, first_failed_at,"
            " next_attempt_at, last_error) VALUES ($1, 1, 1.0, 2.0, 'outage')",
            row,
        )
    await pg.execute("UPDATE messages SET status = 'delivered' WHERE id = $1", settled)
    await pg.execute("DELETE FROM messages WHERE id = $1", removed)
    assert await pg.fetchval("SELECT array_agg(message_id) FROM delivery_retries") == [waiting]


async def test_a_new_message_becomes_the_context_after_the_one_before_it(
    pg: asyncpg.Connection,
) -> None:
    first = await add_message(pg, "where shall we go?", terms="where shall we go")
    await add_message(pg, "a notice without terms")
    await add_message(pg, "zanzibar", terms="zanzibar")
    assert await pg.fetchval("SELECT after_terms FROM messages WHERE id = $1", first) == "zanzibar"
    assert await pg.fetch("SELECT partner_id, scope FROM search_scopes") == [("p", "scope-a")]


async def test_the_password_is_never_part_of_an_error(postgres_server: PostgresServer) -> None:
    url = postgres_server.url("no_such_database").replace("postgres@", "postgres:s3cret@")
    with pytest.raises(StoreError) as raised:
        await connect(url)
    assert "no_such_database" in str(raised.value)
    assert "s3cret" not in str(raised.value)


def test_a_url_is_shown_without_its_password() -> None:
    assert redacted("postgresql://bot:hunter2@db.local:5433/gateway") == (
        "postgresql://bot:***@db.local:5433/gateway"
    )
    assert redacted("postgresql://bot@db.local/gateway") == "postgresql://bot@db.local/gateway"
