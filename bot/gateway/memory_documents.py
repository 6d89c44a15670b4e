"""Which backend keeps a gateway's memory documents (``[storage] documents``): files under the
data directory, or rows in the store's database. "auto" keeps files on SQLite (one process,
the owner edits them in place) and rows on PostgreSQL, where workers share nothing but the
database (docs/architecture.md "Several workers").

With rows the database is the only truth, and files are read into it once per namespace (the
owner's folder, each partner's), never again:

- A namespace's files are read when the database has no record that they were:
  ``companion database copy`` records every namespace it copies; start-up reads a namespace
  without that record and then records it; a partner made in the database (``/admin partner
  new``, a clone, a card import) is recorded as it is made, with nothing to read. A
  partner's files on a worker's disk — however old, whatever they hold — are never read over
  the database's documents again, so a restart cannot bring back what ``/forget`` or
  ``/admin forget`` took out of them (it empties rows; it does not delete them).
- Reading copies a file only where the database has never had a document of that name (no
  row at all; an emptied row is a document someone emptied), so a reading cut off halfway is
  finished by the next start, and two workers starting together write each document once.
- What is read leaves out every entry a tombstone of that document matches
  (:meth:`partners.tombstones.Tombstones.strip`).

The record is a row of the settings table per namespace (:data:`FILES_READ_KEY`). Edit a
document with ``companion memory edit`` or the ``/admin`` commands, not on disk.

Partners follow the same choice (:func:`partner_catalog`, the design in
:mod:`partners.catalog`): with rows, which partners exist and their own files (preset.yml,
card.json, lorebook.json, avatar.png) are rows too, and a partner directory on a worker's disk
is read into the database once (:func:`adopt_local_partners`, recorded per namespace under
:data:`partners.partner_rows.PARTNER_FILES_READ_KEY`), never again.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bot.config.model import Config
from bot.store import Store
from bot.store.sqlite import SqliteStore
from partners.catalog import PartnerCatalog, apply_search_languages
from partners.documents import DatabaseDocuments, Documents, FileDocuments, adopt_files
from partners.memory import MemoryStore
from partners.partner_rows import (
    MEMORY_FILES_READ_KEY,
    PartnerRows,
    count_change,
    files_read_record,
    is_loaded_file,
)
from partners.persona import PARTNER_FILES, PARTNER_ID, PRESET_FILE
from partners.tombstones import Tombstones, namespace_partner

logger = logging.getLogger(__name__)

FILES_READ_KEY = MEMORY_FILES_READ_KEY
"""The settings row recording that a namespace's files were read into the database (its
value: when, in epoch seconds)."""


class StoreDocuments(DatabaseDocuments):
    """Document rows of the gateway's own store, which also keeps the records of whose files
    were read and the tombstones those files are checked against. A document the partner
    catalog holds in memory (POST_HISTORY.md, or a partner's own file written as a document)
    counts a change of the catalog when it is written, so every worker loads it again."""

    def __init__(self, store: Store, data_dir: Path) -> None:
        super().__init__(store, data_dir)
        self.store = store

    async def write(self, root: Path, name: str, data: bytes, expected: str) -> str:
        version = await super().write(root, name, data, expected)
        await self._catalog_changed(root, name)
        return version

    async def delete(self, root: Path, name: str) -> bool:
        deleted = await super().delete(root, name)
        await self._catalog_changed(root, name)
        return deleted

    async def _catalog_changed(self, root: Path, name: str) -> None:
        if is_loaded_file(self.namespace(root), name):
            await count_change(self.store)


def keeps_rows(config: Config, store: Store) -> bool:
    """Whether memory documents are rows of ``store`` rather than files."""
    chosen = config.storage.documents
    if chosen == "auto":
        return not isinstance(store, SqliteStore)
    return chosen == "database"


def rows_configured(config: Config) -> bool:
    """:func:`keeps_rows` for the store ``config`` opens, known without opening it."""
    chosen = config.storage.documents
    if chosen == "auto":
        return config.storage.database_url is not None
    return chosen == "database"


def memory_documents(config: Config, store: Store) -> Documents:
    if keeps_rows(config, store):
        return StoreDocuments(store, config.data_dir)
    return FileDocuments()


def memory_store(config: Config, store: Store) -> MemoryStore:
    """The memory store a gateway (or a CLI command beside it) reads and writes through."""
    return MemoryStore(
        changelog_keep=config.memory.changelog_keep, documents=memory_documents(config, store)
    )


def files_read_key(namespace: str) -> str:
    return FILES_READ_KEY.format(namespace=namespace)


async def adopt_local_files(memory: MemoryStore, roots: list[Path]) -> None:
    """With rows, read the memory files of each of ``roots`` into the database if it was
    never done for that namespace (see the module's docstring), then record that it was."""
    documents = memory.documents
    if not isinstance(documents, StoreDocuments):
        return
    read = await documents.store.settings()
    for root in roots:
        namespace = documents.namespace(root)
        if files_read_key(namespace) in read:
            continue
        partner = namespace_partner(namespace)
        forgotten = Tombstones(await documents.store.partner_tombstones(partner))
        copied = await adopt_files(documents, root, forgotten.strip)
        if copied:
            logger.info("copied %d memory files of %s into the database", len(copied), root)
        await documents.store.put_setting(files_read_key(namespace), files_read_record())


def partner_catalog(config: Config, store: Store, worker_id: str | None = None) -> PartnerCatalog:
    """The partners as this gateway keeps them: directories under ``data/partners``, or with
    rows (:func:`keeps_rows`) rows of ``store`` (nothing is loaded yet). A worker's catalog
    (``worker_id``) of rows indexes a partner's new search language and says which version
    it loaded (:func:`publish_catalog`) each time it loads; another only reads."""
    root = config.data_dir / "partners"
    if not keeps_rows(config, store):
        return PartnerCatalog(root)
    if worker_id is None:  # a command line, or doctor: it reads, a worker does the rest
        return PartnerCatalog(root, PartnerRows(store))

    async def loaded(catalog: PartnerCatalog) -> None:
        await apply_search_languages(store, catalog)
        await publish_catalog(store, worker_id, catalog)

    return PartnerCatalog(root, PartnerRows(store), loaded)


async def adopt_local_partners(catalog: PartnerCatalog) -> None:
    """With rows, read the own files of each partner directory on this worker's disk into the
    database, if that was never done for its namespace (see the module's docstring)."""
    if catalog.rows is None:
        return
    files = await asyncio.to_thread(_local_partner_files, catalog.root)
    for partner_id, found in files.items():
        copied = await catalog.rows.read_files_once(partner_id, found)
        if copied:
            logger.info(
                "copied %s of %s into the database", ", ".join(copied), catalog.root / partner_id
            )


def _local_partner_files(root: Path) -> dict[str, dict[str, bytes]]:
    """The own files of every partner directory under ``root`` (blocking)."""
    found: dict[str, dict[str, bytes]] = {}
    if not root.is_dir():
        return found
    for directory in sorted(root.iterdir()):
        if not directory.is_dir() or not PARTNER_ID.fullmatch(directory.name):
            continue
        files = {PRESET_FILE: b""}  # a directory without one is a partner of all defaults
        for name in PARTNER_FILES:
            try:
                files[name] = (directory / name).read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                continue
        found[directory.name] = files
    return found


LOADED_CATALOG_KEY = "partners.loaded:{worker}"
"""The settings row in which a worker says which catalog version it has loaded and how many
partners that is (``"<version> <count>"``), for ``/admin status`` and ``companion doctor``."""


async def publish_catalog(store: Store, worker_id: str, catalog: PartnerCatalog) -> None:
    """Record what ``catalog`` holds as this worker's, and drop the records of workers that
    left the registry."""
    await store.put_setting(
        LOADED_CATALOG_KEY.format(worker=worker_id), f"{catalog.version} {len(catalog.all())}"
    )
    running = {worker.worker_id for worker in await store.workers()}
    for key in await loaded_catalogs(store):
        if key not in running and key != worker_id:
            await store.delete_setting(LOADED_CATALOG_KEY.format(worker=key))


async def loaded_catalogs(store: Store) -> dict[str, tuple[int, int]]:
    """(partners, catalog version) each worker said it has loaded, by worker id."""
    prefix = LOADED_CATALOG_KEY.format(worker="")
    found = {}
    for key, value in (await store.settings()).items():
        version, _, count = value.partition(" ")
        if key.startswith(prefix) and version.isdigit() and count.isdigit():
            found[key.removeprefix(prefix)] = (int(count), int(version))
    return found
