"""``companion database copy``: move a SQLite gateway onto PostgreSQL. Every table of
``data_dir/gateway.db`` is copied into an empty PostgreSQL database (``--to URL``, else
``[storage] database_url``), and with ``[storage] documents = "auto"`` the memory files of the
data directory become the database's document rows, and so do the partners' own files
(preset.yml, card.json, lorebook.json, avatar.png: which partners exist), so workers that
share nothing but the database find them. The SQLite file is left as it was; the gateway must
not be running (the data directory's lock), or what it wrote meanwhile would be missing from
the copy.

From then on the database is the only truth (docs/architecture.md "Several workers"): the
copy records in it that each namespace's files were read, so no worker reads them again
(:mod:`bot.gateway.memory_documents`), and writes :data:`COPIED_NOTE` into the data directory, which
stops a second copy of this directory — into any database — from bringing back what was
changed or forgotten on the database since. The memory files go over without the entries
their tombstones match (a file restored by hand after a ``/forget``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bot.cli.data import CLIError, lock_data_dir
from bot.config.model import Config
from bot.gateway.memory_documents import files_read_key, files_read_record
from bot.store.opening import is_database_url
from bot.store.postgres.connection import redacted
from bot.store.postgres.copy import NewDocument, copy_to_postgres
from bot.store.postgres.copy_source import read_tombstones
from partners.documents import ADOPTED_FOLDERS, FileDocuments
from partners.partner_rows import PARTNER_FILES_READ_KEY, namespace_of
from partners.persona import PARTNER_FILES, PARTNER_ID, PRESET_FILE
from partners.tombstones import Tombstones, namespace_partner

COPIED_NOTE = "copied-to-database.txt"
"""Written into the data directory by a copy that succeeded; its first line says where to."""
COPIED_TEXT = """Copied into {url} on {when} by `companion database copy`.
Since then that database holds this gateway's data. gateway.db and the memory files in this
directory are how things stood at that moment, like a backup taken then: they still hold what
was changed or forgotten on the database since, and no gateway on that database reads them
again. `companion database copy` refuses to copy this directory again while this file is here
(it would bring that back); delete this file only if the gateway never ran on that database.
"""
NEXT_STEP = (
    "Next: set [storage] database_url to that database (if it is not set yet) and start the"
    " gateway with `companion run`. {sqlite} is left as it was: keep it until the gateway runs"
    " well on PostgreSQL. {note} records this copy: the gateway never reads the memory files"
    " here again, and a second copy of this directory is refused."
)


def cmd_database_copy(config: Config, args: argparse.Namespace) -> int:
    url = target_url(config, args.to)
    source = config.data_dir / "gateway.db"
    if not source.is_file():
        raise CLIError(f"no SQLite database at {source}: nothing to copy (check storage.data_dir)")
    refuse_a_second_copy(config.data_dir)
    print(f"copying {source} into {redacted(url)} …", flush=True)
    lock = lock_data_dir(config)
    try:
        copied = asyncio.run(_copy(config, source, url))
        note_the_copy(config.data_dir, url)
    finally:
        lock.release()
    print(summary(copied))
    if config.storage.documents == "files":
        print("Memory documents stay files in the data directory ([storage] documents = files).")
    print(NEXT_STEP.format(sqlite=source, note=config.data_dir / COPIED_NOTE))
    return 0


async def _copy(config: Config, source: Path, url: str) -> dict[str, int]:
    """The copy, with the memory files (without what was forgotten) when they become rows,
    and the records that every namespace's files were read when documents are rows."""
    roots = document_roots(config.data_dir)
    documents = None
    settings = {}
    record = files_read_record()
    if moves_files(config):
        forgotten = tombstones_by_partner(await read_tombstones(source))
        documents = chained(
            memory_files(config.data_dir, roots, forgotten), partner_files(config.data_dir)
        )
        for partner_id in await asyncio.to_thread(partner_ids, config.data_dir):
            key = PARTNER_FILES_READ_KEY.format(namespace=namespace_of(partner_id))
            settings[key] = record
    if config.storage.documents != "files":
        settings |= {
            files_read_key(root.relative_to(config.data_dir).as_posix()): record for root in roots
        }
    return await copy_to_postgres(source, url, documents=documents, settings=settings)


def refuse_a_second_copy(data_dir: Path) -> None:
    """A directory copied before is older than the database it went into: copying it again
    would bring back what was changed or forgotten there since."""
    note = data_dir / COPIED_NOTE
    if not note.is_file():
        return
    first = note.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
    raise CLIError(
        f"{data_dir} was copied into a database already ({first[0] if first else note.name});"
        " since then that database holds the gateway's data, and this directory still holds"
        " what was changed or forgotten there since, so nothing was copied. If the gateway"
        f" never ran on that database (a trial copy), delete {note} and copy again"
    )


def note_the_copy(data_dir: Path, url: str) -> None:
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    text = COPIED_TEXT.format(url=redacted(url), when=when)
    (data_dir / COPIED_NOTE).write_text(text, encoding="utf-8")


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


def tombstones_by_partner(rows: list[tuple[str, str, str]]) -> dict[str, Tombstones]:
    """(partner, key, hash) rows as each partner's :class:`Tombstones`."""
    found: dict[str, dict[str, set[str]]] = {}
    for partner, key, text_hash in rows:
        found.setdefault(partner, {}).setdefault(key, set()).add(text_hash)
    return {partner: Tombstones(by_key) for partner, by_key in found.items()}


async def memory_files(
    data_dir: Path, roots: list[Path], forgotten: dict[str, Tombstones] | None = None
) -> AsyncIterator[NewDocument]:
    """The memory documents under ``roots`` kept as files (persona, memory, per-user files,
    journals, changelog), one at a time, as document rows named like the gateway names them,
    without the entries ``forgotten`` (tombstones by partner) matches."""
    files = FileDocuments()
    for root in roots:
        namespace = root.relative_to(data_dir).as_posix()
        tombstones = (forgotten or {}).get(namespace_partner(namespace), Tombstones({}))
        for folder in ADOPTED_FOLDERS:
            for name in await files.names(root, folder):
                data = tombstones.strip(name, (await files.read(root, name)).data)
                mtime = await asyncio.to_thread(os.path.getmtime, root / name)
                yield NewDocument(namespace, name, data, mtime)


def partner_ids(data_dir: Path) -> list[str]:
    """The partner directories of the data directory (not the trash), by id (blocking)."""
    partners = data_dir / "partners"
    if not partners.is_dir():
        return []
    return sorted(p.name for p in partners.iterdir() if p.is_dir() and PARTNER_ID.fullmatch(p.name))


async def partner_files(data_dir: Path) -> AsyncIterator[NewDocument]:
    """Each partner directory's own files as rows beside its documents (a directory without a
    preset.yml is a partner of all defaults: it gets an empty one, as it is read)."""
    for partner_id in await asyncio.to_thread(partner_ids, data_dir):
        root = data_dir / "partners" / partner_id
        for name in PARTNER_FILES:
            path = root / name
            if not await asyncio.to_thread(path.is_file):
                if name == PRESET_FILE:
                    yield NewDocument(namespace_of(partner_id), name, b"", time.time())
                continue
            data = await asyncio.to_thread(path.read_bytes)
            mtime = await asyncio.to_thread(os.path.getmtime, path)
            yield NewDocument(namespace_of(partner_id), name, data, mtime)


async def chained(*parts: AsyncIterator[NewDocument]) -> AsyncIterator[NewDocument]:
    for part in parts:
        async for document in part:
            yield document


def summary(copied: dict[str, int]) -> str:
    """Rows per table, the tables that held any first, and the total."""
    width = max(len(name) for name in copied)
    lines = [f"  {name:<{width}}  {count:>9,}" for name, count in copied.items() if count]
    empty = sorted(name for name, count in copied.items() if not count)
    lines.append(f"  {'total':<{width}}  {sum(copied.values()):>9,} rows, counts checked")
    if empty:
        lines.append(f"  (no rows in {', '.join(empty)})")
    return "copied:\n" + "\n".join(lines)
