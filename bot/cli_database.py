"""``companion database copy``: move a SQLite gateway onto PostgreSQL. Every table of
``data_dir/gateway.db`` is copied into an empty PostgreSQL database (``--to URL``, else
``[storage] database_url``), and with ``[storage] documents = "auto"`` the memory files of the
data directory become the database's document rows, so workers that share nothing but the
database find them. The SQLite file is left as it was; the gateway must not be running (the
data directory's lock), or what it wrote meanwhile would be missing from the copy."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

from bot.cli_data import CLIError, lock_data_dir
from bot.config import Config
from bot.store.postgres.connection import is_database_url, redacted
from bot.store.postgres.copy import NewDocument, copy_to_postgres
from partners.documents import ADOPTED_FOLDERS, FileDocuments

NEXT_STEP = (
    "Next: set [storage] database_url to that database (if it is not set yet) and start the"
    " gateway with `companion run`. {sqlite} is left as it was: keep it until the gateway runs"
    " well on PostgreSQL."
)


def cmd_database_copy(config: Config, args: argparse.Namespace) -> int:
    url = target_url(config, args.to)
    source = config.data_dir / "gateway.db"
    if not source.is_file():
        raise CLIError(f"no SQLite database at {source}: nothing to copy (check storage.data_dir)")
    roots = document_roots(config.data_dir) if moves_files(config) else None
    documents = memory_files(config.data_dir, roots) if roots is not None else None
    print(f"copying {source} into {redacted(url)} …", flush=True)
    lock = lock_data_dir(config)
    try:
        copied = asyncio.run(copy_to_postgres(source, url, documents=documents))
    finally:
        lock.release()
    print(summary(copied))
    if config.storage.documents == "files":
        print("Memory documents stay files in the data directory ([storage] documents = files).")
    print(NEXT_STEP.format(sqlite=source))
    return 0


def target_url(config: Config, given: str | None) -> str:
    """The PostgreSQL database to copy into: ``--to``, else ``[storage] database_url``."""
    if given is not None:
        if not is_database_url(given):
            raise CLIError(
                "--to must be a PostgreSQL URL such as postgresql://user:password@host/companion"
            )
        return given
    if config.storage.database_url is None:
        raise CLIError(
            "name the PostgreSQL database to copy into: --to postgresql://user:password@host/"
            "name, or [storage] database_url in the config"
        )
    return config.storage.database_url.get_secret_value()


def moves_files(config: Config) -> bool:
    """Whether memory files become rows: on SQLite "auto" keeps them as files, on PostgreSQL
    as rows. ("database" kept them as rows on SQLite already: the table is copied; "files"
    keeps them files on PostgreSQL too.)"""
    return config.storage.documents == "auto"


def document_roots(data_dir: Path) -> list[Path]:
    """Where memory documents are kept as files: the owner's folder and every partner's
    (deleted partners in ``partners/.trash`` stay files)."""
    partners = data_dir / "partners"
    roots = [data_dir / "owner"]
    if partners.is_dir():
        roots += sorted(p for p in partners.iterdir() if p.is_dir() and not p.name.startswith("."))
    return roots


async def memory_files(data_dir: Path, roots: list[Path]) -> AsyncIterator[NewDocument]:
    """The memory documents under ``roots`` kept as files (persona, memory, per-user files,
    journals, changelog), one at a time, as document rows named like the gateway names them."""
    files = FileDocuments()
    for root in roots:
        namespace = root.relative_to(data_dir).as_posix()
        for folder in ADOPTED_FOLDERS:
            for name in await files.names(root, folder):
                data = (await files.read(root, name)).data
                mtime = await asyncio.to_thread(os.path.getmtime, root / name)
                yield NewDocument(namespace, name, data, mtime)


def summary(copied: dict[str, int]) -> str:
    """Rows per table, the tables that held any first, and the total."""
    width = max(len(name) for name in copied)
    lines = [f"  {name:<{width}}  {count:>9,}" for name, count in copied.items() if count]
    empty = sorted(name for name, count in copied.items() if not count)
    lines.append(f"  {'total':<{width}}  {sum(copied.values()):>9,} rows, counts checked")
    if empty:
        lines.append(f"  (no rows in {', '.join(empty)})")
    return "copied:\n" + "\n".join(lines)
