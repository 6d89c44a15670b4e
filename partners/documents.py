"""Where memory documents are kept: the one seam between the memory store and its storage.

A document is a namespace root (``data/owner``, ``data/partners/<id>``) and a relative name
inside it (``MEMORY.md``, ``users/<uid>.md``, ``memory/2026-05-01.md``,
``changelog/changes.jsonl``), as :class:`partners.memory.MemoryFile` names it. Two backends
keep them (docs/architecture.md "Several workers"):

- :class:`FileDocuments`, the default with SQLite: files under the data directory, replaced
  atomically, one asyncio lock per file; the owner may edit them by hand at any time and the
  next read sees it.
- :class:`DatabaseDocuments`: rows of the store's ``documents`` table, so workers that share
  nothing but the database (each with its own ``data_dir``, or none) read and write the same
  documents; one document's writers take turns across workers on a database lock.

Both give every read a version and refuse a write whose expected version is no longer current
(:class:`DocumentConflict`): optimistic concurrency for a copy the owner edited elsewhere, and
a second guard behind the lock.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from bot.store.rows import DocumentRow

logger = logging.getLogger(__name__)

FILE_VERSION_CHARS = 12
DOCUMENT_SUFFIXES = (".md", ".jsonl")
"""Memory documents are Markdown, the changelog JSON lines; preset.yml, avatars and lorebooks
are a partner's own files, not its documents (with rows they are rows of the same namespace,
which the partner catalog reads: ``partners/partner_rows.py``)."""


@dataclass(frozen=True)
class StoredDocument:
    """A document's bytes as read, and the version a write must name to replace them
    (a missing document reads as empty, with the version of "not there")."""

    data: bytes
    version: str


class DocumentConflict(Exception):
    """A write named a version that is no longer the document's: someone wrote it since."""

    def __init__(self, name: str, current: StoredDocument) -> None:
        super().__init__(f"{name} changed since it was read; nothing was written")
        self.name = name
        self.current = current


class Documents(Protocol):
    """Read with a version, write with the expected version, append, list, delete, and a lock
    per document held across a read-modify-write."""

    async def read(self, root: Path, name: str) -> StoredDocument: ...

    async def write(self, root: Path, name: str, data: bytes, expected: str) -> str:
        """Replace the document if it is still at ``expected``; its new version, else
        :class:`DocumentConflict`."""

    async def append(self, root: Path, name: str, data: bytes) -> None:
        """Add bytes at the end (the changelog's records), creating the document if needed."""

    async def names(self, root: Path, folder: str) -> list[str]:
        """The names of the documents directly in ``folder`` (``users``, ``memory``; ``""``
        for the root's own), sorted: names ending in one of :data:`DOCUMENT_SUFFIXES`."""

    async def delete(self, root: Path, name: str) -> bool: ...

    def lock(self, root: Path, name: str) -> AbstractAsyncContextManager[None]:
        """Held while one writer reads, changes and writes the document back."""


def file_version(data: bytes) -> str:
    """A file's version: the first hex digits of the sha256 of its bytes (a hand edit is a
    new version though nothing counted it)."""
    return hashlib.sha256(data).hexdigest()[:FILE_VERSION_CHARS]


def _checked_name(name: str) -> str:
    """A document name stays inside its namespace: relative, no ``..``."""
    parts = PurePosixPath(name).parts
    if not parts or PurePosixPath(name).is_absolute() or ".." in parts:
        raise ValueError(f"document name {name!r} must be a relative path inside the partner")
    return name


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by a complete new file (a crash leaves the old one or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _append_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


class FileDocuments:
    """Documents as files under their namespace root (the default with SQLite). Locks are
    per process: the data directory's OS lock keeps one gateway writing it."""

    def __init__(self) -> None:
        self._locks: dict[Path, asyncio.Lock] = {}
        # a version check and the replace that follows it, or one append, happen as one step
        # (they run on worker threads: the changelog is appended to while it is rewritten)
        self._io = threading.Lock()

    def lock(self, root: Path, name: str) -> AbstractAsyncContextManager[None]:
        path = (root / _checked_name(name)).resolve()
        return self._locks.setdefault(path, asyncio.Lock())

    async def read(self, root: Path, name: str) -> StoredDocument:
        data = await asyncio.to_thread(_read_file, root / _checked_name(name))
        return StoredDocument(data, file_version(data))

    async def write(self, root: Path, name: str, data: bytes, expected: str) -> str:
        path = root / _checked_name(name)

        def replace() -> str:
            with self._io:
                current = _read_file(path)
                if file_version(current) != expected:
                    raise DocumentConflict(name, StoredDocument(current, file_version(current)))
                write_atomic(path, data)
            return file_version(data)

        return await asyncio.to_thread(replace)

    async def append(self, root: Path, name: str, data: bytes) -> None:
        path = root / _checked_name(name)

        def append() -> None:
            with self._io:
                _append_file(path, data)

        await asyncio.to_thread(append)

    async def names(self, root: Path, folder: str) -> list[str]:
        directory = root / _checked_name(folder) if folder else root
        prefix = f"{folder}/" if folder else ""

        def listed() -> list[str]:
            if not directory.is_dir():
                return []
            # a directory named like a document is listed: reading it fails loudly, as a
            # document that cannot be read should (the nightly pass reports it and goes on)
            return sorted(
                f"{prefix}{p.name}"
                for p in directory.iterdir()
                if p.name.endswith(DOCUMENT_SUFFIXES)
                and not p.name.startswith(".")  # a half-written temporary
            )

        return await asyncio.to_thread(listed)

    async def delete(self, root: Path, name: str) -> bool:
        path = root / _checked_name(name)

        def unlink() -> bool:
            existed = path.exists()
            path.unlink(missing_ok=True)
            return existed

        return await asyncio.to_thread(unlink)


class DocumentRows(Protocol):
    """The store's part that keeps documents as rows (see :mod:`bot.store.documents`)."""

    async def document(self, namespace: str, path: str) -> DocumentRow | None: ...

    async def save_document(
        self, namespace: str, path: str, content: bytes, expected_version: int
    ) -> int | None: ...

    async def append_document(self, namespace: str, path: str, content: bytes) -> int: ...

    async def document_paths(self, namespace: str, folder: str) -> list[str]: ...

    async def document_versions(
        self, namespace_prefix: str, paths: Sequence[str]
    ) -> list[tuple[str, str, int]]: ...

    async def move_documents(self, namespace: str, to_namespace: str) -> int: ...

    async def delete_document(self, namespace: str, path: str) -> bool: ...

    def document_lock(self, namespace: str, path: str) -> AbstractAsyncContextManager[None]: ...


class DatabaseDocuments:
    """Documents as rows in the store. A namespace is its root's path relative to the data
    directory (``owner``, ``partners/luna``): the same on every worker, whatever its own
    ``data_dir``."""

    def __init__(self, rows: DocumentRows, data_dir: Path) -> None:
        self._rows = rows
        self._base = data_dir.resolve()

    def namespace(self, root: Path) -> str:
        try:
            return root.resolve().relative_to(self._base).as_posix()
        except ValueError:
            raise ValueError(
                f"{root} is outside the data directory {self._base}; memory documents in "
                "the database are named relative to it"
            ) from None

    @asynccontextmanager
    async def _held(self, root: Path, name: str) -> AsyncIterator[None]:
        async with self._rows.document_lock(self.namespace(root), _checked_name(name)):
            yield

    def lock(self, root: Path, name: str) -> AbstractAsyncContextManager[None]:
        return self._held(root, name)

    async def read(self, root: Path, name: str) -> StoredDocument:
        row = await self._rows.document(self.namespace(root), _checked_name(name))
        if row is None:
            return StoredDocument(b"", "0")
        return StoredDocument(row.content, str(row.version))

    async def exists(self, root: Path, name: str) -> bool:
        """Whether the document has a row, however empty (reading a missing one gives the
        same empty bytes as reading an emptied one)."""
        return await self._rows.document(self.namespace(root), _checked_name(name)) is not None

    async def write(self, root: Path, name: str, data: bytes, expected: str) -> str:
        namespace = self.namespace(root)
        saved = await self._rows.save_document(
            namespace, _checked_name(name), data, int(expected) if expected.isdigit() else -1
        )
        if saved is None:
            raise DocumentConflict(name, await self.read(root, name))
        return str(saved)

    async def append(self, root: Path, name: str, data: bytes) -> None:
        await self._rows.append_document(self.namespace(root), _checked_name(name), data)

    async def names(self, root: Path, folder: str) -> list[str]:
        folder = _checked_name(folder) if folder else ""
        paths = await self._rows.document_paths(self.namespace(root), folder)
        # a partner's own files (preset.yml, card.json, ...) are rows beside its documents
        return [path for path in paths if path.endswith(DOCUMENT_SUFFIXES)]

    async def delete(self, root: Path, name: str) -> bool:
        return await self._rows.delete_document(self.namespace(root), _checked_name(name))


ADOPTED_FOLDERS = ("", "users", "memory", "changelog")


async def adopt_files(
    target: DatabaseDocuments, root: Path, keep: Callable[[str, bytes], bytes] | None = None
) -> list[str]:
    """Copy the memory documents found as files under ``root`` into ``target`` where it has
    never had a document of that name (a partner made from the template or an imported card,
    files the owner wrote), so that a worker whose data directory is empty finds them there.
    A document ``target`` has is never written, even an empty one: an empty row is a document
    someone emptied (``/forget all`` leaves one), and the file beside it is older. ``keep``
    gives the bytes to copy of a file (its name and bytes): what was forgotten left out. The
    names copied."""
    files = FileDocuments()
    copied = []
    for folder in ADOPTED_FOLDERS:
        for name in await files.names(root, folder):
            if await target.exists(root, name):
                continue
            try:
                data = (await files.read(root, name)).data
            except OSError as exc:  # a folder named like a document, a file gone meanwhile
                logger.warning("%s/%s not copied into the database: %s", root, name, exc)
                continue
            try:
                await target.write(root, name, keep(name, data) if keep else data, "0")
            except DocumentConflict:
                continue  # written meanwhile (another worker adopting the same files)
            copied.append(name)
    return copied
