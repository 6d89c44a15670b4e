"""Forgetting on PostgreSQL, which has no secure_delete: after erase_deleted_text no query
finds the words and the search index's files on disk no longer hold them (a GIN index keeps
a term as a key after VACUUM emptied its postings, so the index is rebuilt). What VACUUM does
not reach — freed bytes in a table page until the page is reused, the WAL — is written down in
bot/store/postgres/forgetting.py and docs/forgetting.md, not tested here."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.store import NewMessage, Store
from bot.store.opening import open_store
from tests.postgres_server import PostgresServer

SECRET = "zanzibarqq"


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    name = await postgres_server.create_database(template=await postgres_server.migrated_template())
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


async def said(store: Store, text: str) -> int:
    message_id = await store.add_message(
        NewMessage("dm:a", "user", text, "user:a", partner_id="p", user_key="a")
    )
    assert message_id is not None
    return message_id


async def relation_bytes(server: PostgresServer, db: asyncpg.Connection, relation: str) -> bytes:
    await db.execute("CHECKPOINT")  # the pages on disk, not only in shared buffers
    path = await db.fetchval("SELECT pg_relation_filepath($1::regclass)", relation)
    return (server.data_dir / path).read_bytes()


async def test_forgotten_words_leave_the_search_index_files(
    postgres_server: PostgresServer, database: str
) -> None:
    store = await open_store(database)
    db = await asyncpg.connect(database)
    try:
        await said(store, "we talked about tea")
        secret = await said(store, f"my secret island is {SECRET}")
        await said(store, "and then about the weather")
        assert SECRET.encode() in await relation_bytes(postgres_server, db, "messages_search")
        assert await store.delete_messages([secret]) == 1
        assert await store.erase_deleted_text() is True
        assert await store.search("p", SECRET, None, 10) == []
        assert not await db.fetchval(
            "SELECT count(*) FROM messages WHERE concat_ws(' ', text, terms, before_terms,"
            " after_terms) LIKE '%' || $1 || '%'",
            SECRET,
        )
        assert SECRET.encode() not in await relation_bytes(postgres_server, db, "messages_search")
        # the store still searches on the rebuilt index (its own words rank first)
        hits = await store.search("p", "weather", None, 10)
        assert hits[0].text == "and then about the weather"
    finally:
        await db.close()
        await store.close()
