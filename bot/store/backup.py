"""Consistent archives of the data directory, for ``companion backup`` and ``/admin backup``.

The database is copied with SQLite's online backup, which is consistent while the gateway keeps
writing; the other files of the data directory go in as they are. Earlier backups, exports and
the lock file are left out. A database on PostgreSQL is not copied into a file here: the
backup is refused, naming pg_dump (:data:`bot.store.postgres.store.BACKUP_ADVICE`), rather
than writing an archive without the database in it.

There is no restore command: an archive is restored by unpacking it over the data directory
(a dump by ``pg_restore``), outside the gateway, and what it brings back is the state of its
moment — tombstones included, so an archive taken before a ``/forget`` brings the forgotten
text back with it, and nothing the gateway runs can tell (docs/forgetting.md: backups taken
before it are out of its reach). The same holds for the data directory a ``companion database
copy`` left behind, which says so in ``copied-to-database.txt``.
"""

from __future__ import annotations

import asyncio
import tarfile
import tempfile
import time
from pathlib import Path

from bot.store import Store, StoreError
from bot.store.opening import is_database_url, open_store
from bot.store.postgres.store import BACKUP_ADVICE

DATABASE = "gateway.db"
SKIPPED = {DATABASE, "gateway.db-wal", "gateway.db-shm", "gateway.lock", "backups", "exports"}


def default_target(data_dir: Path) -> Path:
    return data_dir / "backups" / f"companion-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz"


async def write_backup(
    data_dir: Path,
    target: Path | None = None,
    store: Store | None = None,
    database: Path | str | None = None,
) -> Path:
    """Write the archive and return where it is. ``store``: the running gateway's own
    connection; without it ``database`` (the config's, SQLite's file in ``data_dir`` by
    default) is opened here, beside a running gateway too. StoreError, before anything is
    written, when the database is on PostgreSQL."""
    if is_database_url(database):
        raise StoreError(BACKUP_ADVICE)
    target = target or default_target(data_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / DATABASE
        if store is not None:
            await store.backup_to(snapshot)
        else:
            opened = await open_store(database or data_dir / DATABASE)
            try:
                await opened.backup_to(snapshot)
            finally:
                await opened.close()
        await asyncio.to_thread(_archive, data_dir, snapshot, target)
    return target


def _archive(data_dir: Path, snapshot: Path, target: Path) -> None:
    with tarfile.open(target, "w:gz") as archive:
        archive.add(snapshot, arcname=f"data/{DATABASE}")
        for item in sorted(data_dir.iterdir()) if data_dir.exists() else []:
            if item.name not in SKIPPED and item.resolve() != target.resolve():
                archive.add(item, arcname=f"data/{item.name}")
