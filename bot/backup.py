"""Consistent archives of the data directory, for ``companion backup`` and ``/admin backup``.

The database is copied with SQLite's online backup, which is consistent while the gateway keeps
writing; the other files of the data directory go in as they are. Earlier backups, exports and
the lock file are left out.
"""

from __future__ import annotations

import asyncio
import tarfile
import tempfile
import time
from pathlib import Path

from bot.store import Store

DATABASE = "gateway.db"
SKIPPED = {DATABASE, "gateway.db-wal", "gateway.db-shm", "gateway.lock", "backups", "exports"}


def default_target(data_dir: Path) -> Path:
    return data_dir / "backups" / f"companion-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz"


async def write_backup(
    data_dir: Path, target: Path | None = None, store: Store | None = None
) -> Path:
    """Write the archive and return where it is. ``store``: the running gateway's own
    connection; without it the database is opened here (beside a running gateway too)."""
    target = target or default_target(data_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / DATABASE
        if store is not None:
            await store.backup_to(snapshot)
        else:
            opened = await Store.open(data_dir / DATABASE)
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
