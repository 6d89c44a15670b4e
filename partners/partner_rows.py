"""Partners kept as rows of the store's ``documents`` table (the design is in
:mod:`partners.catalog`): a partner is the namespace ``partners/<id>`` holding a preset.yml row;
its other own files (card.json, lorebook.json, avatar.png) are rows beside it, its persona and
memory are the memory documents of that namespace. The row ``partners`` / ``.catalog`` counts
every change to which partners exist and to their own files: its version is the catalog's.

Every write here takes the document lock of the partner's preset.yml (across workers), writes
the rows naming the versions it read, and then counts the change, so a worker that sees the
new catalog version finds everything the change wrote.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from partners.documents import DocumentRows
from partners.persona import LOADED_FILES, PRESET_FILE, PartnerError, StoredFile

NAMESPACE_PREFIX = "partners/"
CATALOG_NAMESPACE = "partners"
CATALOG_PATH = ".catalog"
"""The row whose version is the catalog's version (its content stays empty)."""
TRASH = ".trash"
MEMORY_FILES_READ_KEY = "documents.files_read:{namespace}"
"""The settings row recording that a namespace's memory files were read into the database
(:mod:`bot.gateway.memory_documents`)."""
PARTNER_FILES_READ_KEY = "partners.files_read:{namespace}"
"""The settings row recording that a partner directory's own files (:data:`PARTNER_FILES`)
were read into the database: never again, whatever that directory holds later."""


class PartnerStore(DocumentRows, Protocol):
    """What partners as rows need of the store: its documents, and its settings for the
    records of what was read from files."""

    async def settings(self) -> dict[str, str]: ...

    async def put_setting(self, key: str, value: str) -> None: ...


def namespace_of(partner_id: str) -> str:
    return f"{NAMESPACE_PREFIX}{partner_id}"


def files_read_record() -> str:
    """The value of a files-read settings row written now (epoch seconds)."""
    return str(int(time.time()))


def _changed_meanwhile(namespace: str, name: str) -> PartnerError:
    return PartnerError(f"{namespace}/{name} changed while it was written; try again")


async def count_change(store: DocumentRows) -> int:
    """Count one change of the catalog (every worker loads it again); its new version."""
    return await store.append_document(CATALOG_NAMESPACE, CATALOG_PATH, b"")


def is_loaded_file(namespace: str, name: str) -> bool:
    """Whether a document is one the catalog holds in memory (a partner's own file, or its
    post-history instructions): a write of it is a change of the catalog."""
    partner_id = namespace.removeprefix(NAMESPACE_PREFIX)
    return (
        namespace.startswith(NAMESPACE_PREFIX)
        and "/" not in partner_id
        and not partner_id.startswith(".")
        and name in LOADED_FILES
    )


Edit = Callable[[bytes | None], bytes]
"""A file's new bytes from its current ones (None: it has none yet)."""


class PartnerRows:
    """Partners in the database: read all of them, add one, change one of its files, move
    one to the trash. Every write counts a new catalog version."""

    def __init__(self, store: PartnerStore) -> None:
        self.store = store
        self._loaded: dict[tuple[str, str], StoredFile] = {}
        """The files read so far, by (namespace, name): read again only at a new version."""

    async def version(self) -> int:
        """The catalog's version: how many changes it has had (0: none yet)."""
        row = await self.store.document(CATALOG_NAMESPACE, CATALOG_PATH)
        return row.version if row is not None else 0

    async def _count_change(self) -> int:
        return await count_change(self.store)

    def _lock(self, partner_id: str) -> AbstractAsyncContextManager[None]:
        return self.store.document_lock(namespace_of(partner_id), PRESET_FILE)

    async def load(self) -> dict[str, dict[str, StoredFile]]:
        """Every partner's own files by partner id (a partner: a namespace with a preset.yml
        row); only the files whose version changed since the last load are read again."""
        found: dict[str, dict[str, StoredFile]] = {}
        loaded: dict[tuple[str, str], StoredFile] = {}
        for namespace, name, version in await self.store.document_versions(
            NAMESPACE_PREFIX, LOADED_FILES
        ):
            partner_id = namespace.removeprefix(NAMESPACE_PREFIX)
            if "/" in partner_id or partner_id.startswith("."):  # the trash
                continue
            stored = self._loaded.get((namespace, name))
            if stored is None or stored.version != version:
                row = await self.store.document(namespace, name)
                if row is None:  # moved or removed since it was listed
                    continue
                stored = StoredFile(row.content, row.version)
            loaded[(namespace, name)] = stored
            found.setdefault(partner_id, {})[name] = stored
        self._loaded = loaded
        return {pid: files for pid, files in found.items() if PRESET_FILE in files}

    async def add(self, partner_id: str, files: Mapping[str, bytes]) -> None:
        """A new partner from all its files (its own and its Markdown documents): written
        whole, preset.yml last, so no worker sees it before its persona; refused when a
        partner of that id exists. Its namespace is recorded as read: files of that name on a
        worker's disk are never read over it."""
        if PRESET_FILE not in files:
            raise PartnerError(f"a partner needs a {PRESET_FILE}")
        namespace = namespace_of(partner_id)
        async with self._lock(partner_id):
            if await self.store.document(namespace, PRESET_FILE) is not None:
                raise PartnerError(f"a partner {partner_id!r} exists already; pick another id")
            names = sorted(files, key=lambda name: name == PRESET_FILE)
            for name in names:
                current = await self.store.document(namespace, name)
                expected = current.version if current is not None else 0
                saved = await self.store.save_document(namespace, name, files[name], expected)
                if saved is None:
                    raise _changed_meanwhile(namespace, name)
            record = files_read_record()
            for key in (MEMORY_FILES_READ_KEY, PARTNER_FILES_READ_KEY):
                await self.store.put_setting(key.format(namespace=namespace), record)
            await self._count_change()

    async def root_files(self, partner_id: str) -> dict[str, bytes]:
        """Every row directly in the partner's namespace — its own files and its persona and
        own memory, not its journals, per-user memory or changelog (what a clone copies)."""
        namespace = namespace_of(partner_id)
        files = {}
        for name in await self.store.document_paths(namespace, ""):
            row = await self.store.document(namespace, name)
            if row is not None:
                files[name] = row.content
        return files

    async def change(self, partner_id: str, name: str, edit: Edit) -> None:
        """Replace one of the partner's own files by ``edit`` of its current bytes (which may
        raise to refuse the change: nothing is written then)."""
        namespace = namespace_of(partner_id)
        async with self._lock(partner_id):
            if await self.store.document(namespace, PRESET_FILE) is None:
                raise PartnerError(f"no partner {partner_id!r}")
            current = await self.store.document(namespace, name)
            data = edit(current.content if current is not None else None)
            expected = current.version if current is not None else 0
            if await self.store.save_document(namespace, name, data, expected) is None:
                raise _changed_meanwhile(namespace, name)
            await self._count_change()

    async def trash(self, partner_id: str) -> str:
        """Move every document of the partner (its files, persona, memory, journals,
        changelog) into a namespace of its own under ``partners/.trash``; nothing is removed.
        Where it went."""
        namespace = namespace_of(partner_id)
        async with self._lock(partner_id):
            if await self.store.document(namespace, PRESET_FILE) is None:
                raise PartnerError(f"no partner {partner_id!r}")
            stamp = time.strftime("%Y%m%d-%H%M%S")
            destination = f"{NAMESPACE_PREFIX}{TRASH}/{partner_id}-{stamp}"
            suffix = 1
            while await self.store.document_paths(destination, ""):
                suffix += 1
                destination = f"{NAMESPACE_PREFIX}{TRASH}/{partner_id}-{stamp}-{suffix}"
            await self.store.move_documents(namespace, destination)
            await self._count_change()
        return destination

    async def read_files_once(self, partner_id: str, files: Mapping[str, bytes]) -> list[str]:
        """A partner directory's own files from a worker's disk, read into the database if
        that was never done for its namespace: each file the database never had a row of,
        then the record that it was done. The names copied."""
        namespace = namespace_of(partner_id)
        key = PARTNER_FILES_READ_KEY.format(namespace=namespace)
        if key in await self.store.settings():
            return []
        copied = []
        async with self._lock(partner_id):
            # a partner of that id made in the database is not mixed with older files
            if await self.store.document(namespace, PRESET_FILE) is None:
                for name in sorted(files, key=lambda name: name == PRESET_FILE):
                    if await self.store.document(namespace, name) is not None:
                        continue
                    if await self.store.save_document(namespace, name, files[name], 0):
                        copied.append(name)
            await self.store.put_setting(key, files_read_record())
            if copied:
                await self._count_change()
        return copied
