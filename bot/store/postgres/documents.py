"""Memory documents on PostgreSQL where its SQL differs (the rest is :mod:`bot.store.documents`):
appending bytes, and the document's lock. Several workers write the same documents, so a
document's lock is a PostgreSQL advisory lock on its name, held by a connection of its own for
the whole read-modify-write; the version check on every write still refuses a write whose lock
was lost with its connection. Inside one worker the document's writers first queue on an
asyncio lock, so a worker holds at most one connection per document it is writing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from bot.store.documents import Documents
from bot.store.postgres.base import PostgresBase, translated
from bot.store.postgres.connection import POOL_SIZE

LOCKS_HELD_AT_MOST = POOL_SIZE // 2
"""Document locks one worker holds at once: each holds a pooled connection while its writer
reads and writes on others (and appends to the changelog, which takes no lock), so they must
never take the whole pool."""


class PostgresDocuments(Documents, PostgresBase):
    """Memory documents kept in the database, shared by every worker."""

    _lock_slots: asyncio.Semaphore | None = None
    _local_locks: dict[str, asyncio.Lock] | None = None

    async def append_document(self, namespace: str, path: str, content: bytes) -> int:
        """Add bytes at the end of the document (created if missing); its new version."""
        row = await self._one(
            "INSERT INTO documents (namespace, path, content, version, updated_at)"
            " VALUES ($1, $2, $3, 1, $4) ON CONFLICT (namespace, path) DO UPDATE SET"
            " content = documents.content || excluded.content,"
            " version = documents.version + 1, updated_at = excluded.updated_at"
            " RETURNING version",
            namespace,
            path,
            content,
            time.time(),
        )
        assert row is not None  # an upsert always returns its row
        return int(row[0])

    def document_lock(self, namespace: str, path: str) -> AbstractAsyncContextManager[None]:
        """Held across one writer's read-modify-write of the document, on every worker."""
        return self._advisory_lock(f"{namespace}/{path}")

    @asynccontextmanager
    async def _advisory_lock(self, name: str) -> AsyncIterator[None]:
        if self._lock_slots is None or self._local_locks is None:
            self._lock_slots = asyncio.Semaphore(LOCKS_HELD_AT_MOST)
            self._local_locks = {}
        # the local lock first: the other writers of this document in this worker wait
        # without a slot or a connection
        local = self._local_locks.setdefault(name, asyncio.Lock())
        async with local, self._lock_slots:
            with translated():
                connection = await self._pool.acquire()
            try:
                self._round_trips += 1
                with translated():
                    await connection.execute(
                        "SELECT pg_advisory_lock(hashtextextended($1, 0))", name
                    )
                try:
                    yield
                finally:
                    self._round_trips += 1
                    with translated():
                        await connection.execute(
                            "SELECT pg_advisory_unlock(hashtextextended($1, 0))", name
                        )
            finally:
                await self._pool.release(connection)
