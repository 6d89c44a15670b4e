"""Memory documents as rows on PostgreSQL (see :mod:`bot.store.documents`, whose SQLite twin
this is). Several workers write the same documents, so a document's lock is a PostgreSQL
advisory lock on its name, held by a connection of its own for the whole read-modify-write;
the version check on every write still refuses a write whose lock was lost with its
connection. Inside one worker the document's writers first queue on an asyncio lock, so a
worker holds at most one connection per document it is writing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from bot.store.postgres.base import PostgresBase, translated
from bot.store.postgres.connection import POOL_SIZE
from bot.store.rows import DocumentRow

LOCKS_HELD_AT_MOST = POOL_SIZE // 2
"""Document locks one worker holds at once: each holds a pooled connection while its writer
reads and writes on others (and appends to the changelog, which takes no lock), so they must
never take the whole pool."""


class Documents(PostgresBase):
    """Memory documents kept in the database, shared by every worker."""

    _lock_slots: asyncio.Semaphore | None = None
    _local_locks: dict[str, asyncio.Lock] | None = None

    async def document(self, namespace: str, path: str) -> DocumentRow | None:
        row = await self._one(
            "SELECT content, version, updated_at FROM documents WHERE namespace = $1 AND path = $2",
            namespace,
            path,
        )
        return DocumentRow(bytes(row[0]), int(row[1]), float(row[2])) if row else None

    async def save_document(
        self, namespace: str, path: str, content: bytes, expected_version: int
    ) -> int | None:
        """Write the document if it is at ``expected_version`` (0: not there yet); its new
        version, or None when it is not."""
        now = time.time()
        if expected_version == 0:
            changed = await self._write(
                "INSERT INTO documents (namespace, path, content, version, updated_at)"
                " VALUES ($1, $2, $3, 1, $4) ON CONFLICT (namespace, path) DO NOTHING",
                namespace,
                path,
                content,
                now,
            )
        else:
            changed = await self._write(
                "UPDATE documents SET content = $1, version = version + 1, updated_at = $2"
                " WHERE namespace = $3 AND path = $4 AND version = $5",
                content,
                now,
                namespace,
                path,
                expected_version,
            )
        return expected_version + 1 if changed == 1 else None

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

    async def document_paths(self, namespace: str, folder: str) -> list[str]:
        """The documents directly inside ``folder`` (not in folders below it), sorted."""
        prefix = folder.rstrip("/") + "/" if folder else ""
        rows = await self._all(
            "SELECT path FROM documents WHERE namespace = $1 AND left(path, $2) = $3"
            " AND strpos(substr(path, $2 + 1), '/') = 0 ORDER BY path",
            namespace,
            len(prefix),
            prefix,
        )
        return [str(row[0]) for row in rows]

    async def document_versions(
        self, namespace_prefix: str, paths: Sequence[str]
    ) -> list[tuple[str, str, int]]:
        """(namespace, path, version) of the documents named one of ``paths`` in every
        namespace that starts with ``namespace_prefix``, without their bytes."""
        rows = await self._all(
            "SELECT namespace, path, version FROM documents WHERE left(namespace, $1) = $2"
            " AND path = ANY($3::text[]) ORDER BY namespace, path",
            len(namespace_prefix),
            namespace_prefix,
            list(paths),
        )
        return [(str(row[0]), str(row[1]), int(row[2])) for row in rows]

    async def move_documents(self, namespace: str, to_namespace: str) -> int:
        """Every document of ``namespace`` renamed into ``to_namespace`` (which must hold
        none of their names); how many."""
        return await self._write(
            "UPDATE documents SET namespace = $1, updated_at = $2 WHERE namespace = $3",
            to_namespace,
            time.time(),
            namespace,
        )

    async def delete_document(self, namespace: str, path: str) -> bool:
        return (
            await self._write(
                "DELETE FROM documents WHERE namespace = $1 AND path = $2", namespace, path
            )
            > 0
        )

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
