"""Which backend keeps a gateway's memory documents (``[storage] documents``): files under the
data directory, or rows in the store's database. "auto" keeps files on SQLite (one process,
the owner edits them in place) and rows on PostgreSQL, where workers share nothing but the
database (DESIGN.md "Several workers (PostgreSQL)")."""

from __future__ import annotations

import logging
from pathlib import Path

from bot.config import Config
from bot.store import Store
from bot.store.sqlite import SqliteStore
from partners.documents import DatabaseDocuments, Documents, FileDocuments, adopt_files
from partners.memory import MemoryStore

logger = logging.getLogger(__name__)


def keeps_rows(config: Config, store: Store) -> bool:
    """Whether memory documents are rows of ``store`` rather than files."""
    chosen = config.storage.documents
    if chosen == "auto":
        return not isinstance(store, SqliteStore)
    return chosen == "database"


def memory_documents(config: Config, store: Store) -> Documents:
    if keeps_rows(config, store):
        return DatabaseDocuments(store, config.data_dir)
    return FileDocuments()


def memory_store(config: Config, store: Store) -> MemoryStore:
    """The memory store a gateway (or a CLI command beside it) reads and writes through."""
    return MemoryStore(
        changelog_keep=config.memory.changelog_keep, documents=memory_documents(config, store)
    )


async def adopt_local_files(memory: MemoryStore, roots: list[Path]) -> None:
    """With rows, copy the memory files this worker's data directory holds into rows that
    do not exist yet (see :func:`partners.documents.adopt_files`)."""
    if not isinstance(memory.documents, DatabaseDocuments):
        return
    for root in roots:
        copied = await adopt_files(memory.documents, root)
        if copied:
            logger.info("copied %d memory files of %s into the database", len(copied), root)


async def clone_documents(memory: MemoryStore, source: Path, target: Path) -> None:
    """With rows, a clone's persona and own memory come from the source's rows (its files
    may be older), then anything else its files hold; journals and per-user memory are not
    cloned (see :meth:`partners.catalog.PartnerCatalog.clone`)."""
    if not isinstance(memory.documents, DatabaseDocuments):
        return
    for name in await memory.documents.names(source, ""):
        data = (await memory.documents.read(source, name)).data
        current = await memory.documents.read(target, name)
        await memory.documents.write(target, name, data, current.version)
    await adopt_local_files(memory, [target])
