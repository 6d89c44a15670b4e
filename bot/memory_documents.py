"""Which backend keeps a gateway's memory documents (``[storage] documents``): files under the
data directory, or rows in the store's database. "auto" keeps files on SQLite (one process,
the owner edits them in place) and rows on PostgreSQL, where workers share nothing but the
database (DESIGN.md "Several workers (PostgreSQL)").

With rows the database is the only truth, and files are read into it once per namespace (the
owner's folder, each partner's), never again:

- A namespace's files are read when the database has no record that they were:
  ``companion database copy`` records every namespace it copies; start-up, ``/admin partner
  new`` and a card import read a namespace without that record and then record it. A
  partner's files on a worker's disk — however old, whatever they hold — are never read over
  the database's documents again, so a restart cannot bring back what ``/forget`` or
  ``/admin forget`` took out of them (it empties rows; it does not delete them).
- Reading copies a file only where the database has never had a document of that name (no
  row at all; an emptied row is a document someone emptied), so a reading cut off halfway is
  finished by the next start, and two workers starting together write each document once.
- What is read leaves out every entry a tombstone of that document matches
  (:meth:`partners.forgetting.Tombstones.strip`).

The record is a row of the settings table per namespace (:data:`FILES_READ_KEY`). Edit a
document with ``companion memory edit`` or the ``/admin`` commands, not on disk.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from bot.config import Config
from bot.store import Store
from bot.store.sqlite import SqliteStore
from partners.documents import DatabaseDocuments, Documents, FileDocuments, adopt_files
from partners.forgetting import Tombstones, namespace_partner
from partners.memory import MemoryStore

logger = logging.getLogger(__name__)

FILES_READ_KEY = "documents.files_read:{namespace}"
"""The settings row recording that a namespace's files were read into the database (its
value: when, in epoch seconds)."""


class StoreDocuments(DatabaseDocuments):
    """Document rows of the gateway's own store, which also keeps the records of whose files
    were read and the tombstones those files are checked against."""

    def __init__(self, store: Store, data_dir: Path) -> None:
        super().__init__(store, data_dir)
        self.store = store


def keeps_rows(config: Config, store: Store) -> bool:
    """Whether memory documents are rows of ``store`` rather than files."""
    chosen = config.storage.documents
    if chosen == "auto":
        return not isinstance(store, SqliteStore)
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


def files_read_record() -> str:
    """The value of a :data:`FILES_READ_KEY` row written now."""
    return str(int(time.time()))


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


async def clone_documents(memory: MemoryStore, source: Path, target: Path) -> None:
    """With rows, a clone's persona and own memory are the source's rows — never its files,
    which the clone's directory copied from the source's and which may be older; journals and
    per-user memory are not cloned (see :meth:`partners.catalog.PartnerCatalog.clone`)."""
    documents = memory.documents
    if not isinstance(documents, StoreDocuments):
        return
    await adopt_local_files(memory, [source])  # a source never read yet is read first
    for name in await documents.names(source, ""):
        data = (await documents.read(source, name)).data
        current = await documents.read(target, name)
        await documents.write(target, name, data, current.version)
    key = files_read_key(documents.namespace(target))
    await documents.store.put_setting(key, files_read_record())
