"""Memory documents as rows: one row per document with its bytes and a version that counts its
writes, and a lock per document across one writer's read-modify-write (see
:mod:`partners.documents`).

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.documents.Documents` but for appending and the lock
(:class:`bot.store.documents.SqliteDocuments`,
:class:`bot.store.postgres.documents.PostgresDocuments`)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from bot.store.rows import DocumentRow


class DocumentsStore(Protocol):
    """Memory documents kept in the database instead of files."""

    async def document(self, namespace: str, path: str) -> DocumentRow | None:
        """A memory document kept as a row (``namespace``: its root relative to the data
        directory, ``path``: its name inside it); None when there is none."""

    async def save_document(
        self, namespace: str, path: str, content: bytes, expected_version: int
    ) -> int | None:
        """Write the document if it is at ``expected_version`` (0: not there yet); its new
        version, or None when someone wrote it since (nothing written)."""

    async def append_document(self, namespace: str, path: str, content: bytes) -> int:
        """Add bytes at the end of the document (created if missing); its new version."""

    async def document_paths(self, namespace: str, folder: str) -> list[str]:
        """The documents directly inside ``folder`` of the namespace, sorted."""

    async def document_versions(
        self, namespace_prefix: str, paths: Sequence[str]
    ) -> list[tuple[str, str, int]]:
        """(namespace, path, version) of the documents named one of ``paths`` in every
        namespace that starts with ``namespace_prefix`` (a partner's files in every
        ``partners/<id>``), without their bytes, sorted."""

    async def move_documents(self, namespace: str, to_namespace: str) -> int:
        """Every document of ``namespace`` renamed into ``to_namespace`` (a deleted
        partner's, into the trash); how many."""

    async def delete_document(self, namespace: str, path: str) -> bool: ...

    def document_lock(self, namespace: str, path: str) -> AbstractAsyncContextManager[None]:
        """Held across one writer's read-modify-write of the document (across workers, on a
        database that several share)."""
