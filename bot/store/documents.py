"""Memory documents as rows (see :mod:`partners.documents`): one row per document, its bytes
as written and a version that counts its writes. One query text for both backends but for
appending bytes and the document's lock: :class:`SqliteDocuments` here (one gateway process
owns a SQLite database, the data directory's lock, so an asyncio lock), and
:mod:`bot.store.postgres.documents` (an advisory lock, several workers)."""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from bot.store.base import StoreBase
from bot.store.rows import DocumentRow


class Documents(StoreBase):
    """Memory documents kept in the database instead of files."""

    async def document(self, namespace: str, path: str) -> DocumentRow | None:
        row = await self._one(
            "SELECT content, version, updated_at FROM documents WHERE namespace = ? AND path = ?",
            namespace,
            path,
        )
        if row is None:
            return None
        content = row[0]
        # a SQLite row written as text by hand (sqlite3 shell) reads as its UTF-8 bytes
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        return DocumentRow(data, int(row[1]), float(row[2]))

    async def save_document(
        self, namespace: str, path: str, content: bytes, expected_version: int
    ) -> int | None:
        """Write the document if it is at ``expected_version`` (0: not there yet); its new
        version, or None when it is not."""
        now = time.time()
        if expected_version == 0:
            changed = await self._write(
                "INSERT INTO documents (namespace, path, content, version, updated_at)"
                " VALUES (?, ?, ?, 1, ?) ON CONFLICT (namespace, path) DO NOTHING",
                namespace,
                path,
                content,
                now,
            )
        else:
            changed = await self._write(
                "UPDATE documents SET content = ?, version = version + 1, updated_at = ?"
                " WHERE namespace = ? AND path = ? AND version = ?",
                content,
                now,
                namespace,
                path,
                expected_version,
            )
        return expected_version + 1 if changed == 1 else None

    @abstractmethod
    async def append_document(self, namespace: str, path: str, content: bytes) -> int:
        """Add bytes at the end of the document (created if missing); its new version."""

    async def document_paths(self, namespace: str, folder: str) -> list[str]:
        """The documents directly inside ``folder`` (not in folders below it), sorted."""
        prefix = folder.rstrip("/") + "/" if folder else ""
        rows = await self._all(
            "SELECT path FROM documents WHERE namespace = ?1 AND substr(path, 1, ?2) = ?3"
            " AND strpos(substr(path, ?2 + 1), '/') = 0 ORDER BY path",
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
        if not paths:
            return []
        marks = ", ".join("?" for _ in paths)
        rows = await self._all(
            "SELECT namespace, path, version FROM documents WHERE substr(namespace, 1, ?) = ?"
            f" AND path IN ({marks}) ORDER BY namespace, path",
            len(namespace_prefix),
            namespace_prefix,
            *paths,
        )
        return [(str(row[0]), str(row[1]), int(row[2])) for row in rows]

    async def move_documents(self, namespace: str, to_namespace: str) -> int:
        """Every document of ``namespace`` renamed into ``to_namespace`` (which must hold
        none of their names); how many."""
        return await self._write(
            "UPDATE documents SET namespace = ?, updated_at = ? WHERE namespace = ?",
            to_namespace,
            time.time(),
            namespace,
        )

    async def delete_document(self, namespace: str, path: str) -> bool:
        return (
            await self._write(
                "DELETE FROM documents WHERE namespace = ? AND path = ?", namespace, path
            )
            > 0
        )

    @abstractmethod
    def document_lock(self, namespace: str, path: str) -> AbstractAsyncContextManager[None]:
        """Held across one writer's read-modify-write of the document."""


class SqliteDocuments(Documents):
    """SQLite's append (a cast keeps the bytes bytes) and lock (one process: asyncio)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._document_locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def append_document(self, namespace: str, path: str, content: bytes) -> int:
        row = await self._one(
            "INSERT INTO documents (namespace, path, content, version, updated_at)"
            " VALUES (?, ?, ?, 1, ?) ON CONFLICT (namespace, path) DO UPDATE SET"
            # || makes text of blobs: the cast keeps the column's bytes bytes
            " content = CAST(documents.content || excluded.content AS BLOB),"
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
        return self._document_locks.setdefault((namespace, path), asyncio.Lock())
