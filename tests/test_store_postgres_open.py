"""Opening the PostgreSQL store from ``[storage] database_url``: open_store chooses the backend
by the URL, and a URL that does not parse, a server that is not there or a wrong password is
one line that names the URL without its password and says what to check."""

from __future__ import annotations

import socket
from pathlib import Path

import asyncpg
import pytest

from bot.store import NewMessage, StoreError
from bot.store.opening import open_store
from bot.store.postgres.connection import redacted
from bot.store.postgres.store import PostgresStore
from bot.store.sqlite import SqliteStore
from tests.postgres_server import PostgresServer


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_password_in_the_query_string_is_hidden_too() -> None:
    assert redacted("postgresql://bot@db.local/gateway?password=hunter2&sslmode=require") == (
        "postgresql://bot@db.local/gateway?password=***&sslmode=require"
    )


def test_a_url_whose_port_is_no_number_is_shown_without_its_password() -> None:
    assert redacted("postgresql://bot:hunter2@db.local:54x2/gateway") == (
        "postgresql://bot:***@db.local:54x2/gateway"
    )


async def test_a_url_that_does_not_parse_is_one_line_without_the_password() -> None:
    with pytest.raises(StoreError) as caught:
        await open_store("postgresql://bot:hunter2@127.0.0.1:54x2/gateway")
    message = str(caught.value)
    assert "hunter2" not in message and "\n" not in message
    assert "postgresql://bot:***@127.0.0.1:54x2/gateway" in message
    assert "storage.database_url" in message


async def test_a_server_that_is_not_there_is_one_line_saying_what_to_check() -> None:
    url = f"postgresql://bot:hunter2@127.0.0.1:{closed_port()}/gateway"
    with pytest.raises(StoreError) as caught:
        await open_store(url)
    message = str(caught.value)
    assert "hunter2" not in message and "\n" not in message
    assert "PostgreSQL server runs" in message


async def test_a_database_that_does_not_exist_is_refused_by_name(
    postgres_server: PostgresServer,
) -> None:
    with pytest.raises(StoreError, match="no_such_db.*does not exist"):
        await open_store(postgres_server.url("no_such_db"))


async def test_store_open_chooses_the_backend_by_the_location(
    postgres_database: str, tmp_path: Path
) -> None:
    on_postgres = await open_store(postgres_database)
    on_sqlite = await open_store(tmp_path / "db.sqlite")
    try:
        assert isinstance(on_postgres, PostgresStore)
        assert isinstance(on_sqlite, SqliteStore)
        await on_postgres.add_message(NewMessage("c", "user", "only on postgres", "user:a"))
        assert (await on_postgres.message(1)) is not None
        assert (await on_sqlite.message(1)) is None
    finally:
        await on_postgres.close()
        await on_sqlite.close()


async def test_a_backup_file_is_refused_with_what_to_use_instead(
    postgres_database: str, tmp_path: Path
) -> None:
    store = await open_store(postgres_database)
    try:
        with pytest.raises(StoreError, match="pg_dump"):
            await store.backup_to(tmp_path / "copy.db")
    finally:
        await store.close()
    assert not (tmp_path / "copy.db").exists()


async def test_a_user_who_may_not_create_the_tables_is_told_so_in_one_line(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    admin = await asyncpg.connect(postgres_database)
    try:
        await admin.execute("DROP ROLE IF EXISTS visitor")
        await admin.execute("CREATE ROLE visitor LOGIN")
    finally:
        await admin.close()
    url = postgres_database.replace("postgresql://postgres@", "postgresql://visitor:hunter2@")
    try:
        with pytest.raises(StoreError) as caught:
            await open_store(url)
    finally:
        admin = await asyncpg.connect(postgres_server.url("postgres"))
        try:
            await admin.execute("DROP ROLE visitor")  # it owns nothing: it could create nothing
        finally:
            await admin.close()
    message = str(caught.value)
    assert "permission denied" in message and "\n" not in message and "hunter2" not in message
    assert "may create tables" in message
