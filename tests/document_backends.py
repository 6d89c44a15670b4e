"""The memory store's document backends, for tests that must hold on every one of them: files
(the default), rows in SQLite, rows in PostgreSQL. Import :func:`memory_backend` into a test
module to run its tests on each."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.store.opening import open_store
from bot.store.postgres.connection import create_pool
from bot.store.postgres.documents import PostgresDocuments
from bot.store.postgres.migrations import migrate
from partners.documents import DatabaseDocuments, Documents, FileDocuments
from partners.memory import MemoryFile, MemoryStore
from tests.postgres_server import PostgresServer

DOCUMENT_BACKENDS = ("files", "sqlite", "postgres")


async def no_recompute(method: str) -> None:
    raise AssertionError(f"no PostgreSQL step recomputes rows yet, but {method} was called")


@dataclass
class MemoryBackend:
    """One document backend under a data directory; :meth:`store` makes a memory store on it
    (a second one is a second worker on the same documents)."""

    name: str
    data_dir: Path
    documents: Documents

    def store(self, changelog_keep: int = 500) -> MemoryStore:
        return MemoryStore(changelog_keep=changelog_keep, documents=self.documents)

    async def raw(self, file: MemoryFile) -> bytes:
        """The document's bytes as kept."""
        return (await self.documents.read(file.root, file.name)).data

    async def put(self, file: MemoryFile, data: bytes) -> None:
        """Write a document behind the memory store's back, as the owner's editor does."""
        current = await self.documents.read(file.root, file.name)
        await self.documents.write(file.root, file.name, data, current.version)


@pytest.fixture(params=DOCUMENT_BACKENDS)
async def memory_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[MemoryBackend]:
    if request.param == "files":
        yield MemoryBackend("files", tmp_path, FileDocuments())
    elif request.param == "sqlite":
        store = await open_store(tmp_path / "db.sqlite")
        yield MemoryBackend("sqlite", tmp_path, DatabaseDocuments(store, tmp_path))
        await store.close()
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        database = await server.create_database()
        pool = await create_pool(server.url(database))
        async with pool.acquire() as db:
            await migrate(db, no_recompute)
        yield MemoryBackend(
            "postgres", tmp_path, DatabaseDocuments(PostgresDocuments(pool), tmp_path)
        )
        await pool.close()
        await server.drop_database(database)
