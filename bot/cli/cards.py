"""``companion partners import|export`` and ``companion lore import``: character cards and
lorebooks from the terminal (``partners/cards.py``, ``partners/lore_books.py``).

An import shows the owner what the card becomes and asks before anything is written; ``--yes``
skips the question. Writing goes where the gateway keeps partners (``partners/catalog.py``):
into a directory under the data directory's lock, like every command that changes partners
there, or into the database every worker shares.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.app import DataDirLock
from bot.cli import terminal
from bot.cli.data import load_catalog, with_catalog
from bot.config.model import Config
from bot.gateway.memory_documents import memory_store, rows_configured
from bot.store import Store
from partners.card_files import read_character
from partners.card_format import MAX_CARD_FILE_BYTES, CardError, parse_json
from partners.cards import (
    TEXT_FILES,
    dump_book,
    export_card,
    export_partner,
    import_files,
    plan_import,
    write_import,
)
from partners.catalog import PartnerCatalog
from partners.lore_books import LOREBOOK_FILE, LoreBudget, parse_book
from partners.lore_format import MAX_LORE_ENTRIES, MAX_LOREBOOK_BYTES, CheckedBook, check_book
from partners.memory import MemoryFile
from partners.persona import Partner
from partners.world_info import FIX_WORLD_INFO, from_world_info

BOM = b"\xef\xbb\xbf"
"""What some editors write before UTF-8 text; JSON files are read with or without it."""


class CardCommandError(Exception):
    """A problem with the owner's file or request; printed as one line."""


def _read(path_text: str) -> tuple[bytes, str]:
    path = Path(path_text)
    if not path.is_file():
        raise CardCommandError(f"{path_text}: no such file")
    if path.stat().st_size > MAX_CARD_FILE_BYTES:
        raise CardCommandError(
            f"{path.name}: {path.stat().st_size:,} bytes is over the limit of "
            f"{MAX_CARD_FILE_BYTES:,}"
        )
    return path.read_bytes(), path.name


def cmd_partners_import(config: Config, args: argparse.Namespace) -> int:
    raw, name = _read(args.file)
    root = config.data_dir / "partners"
    rows = rows_configured(config)
    taken = _known_partner(config) if rows else root
    plan = plan_import(raw, name, args.id, taken, LoreBudget.configured(config).tokens())
    print(f"{terminal.printable(plan.name)} from {name}:")
    for line in plan.summary():
        print(f"  {terminal.printable(line)}")
    if not args.yes:
        answer = terminal.confirm(f"Create partner {plan.partner_id!r}?")
        if answer is None:
            raise CardCommandError("nothing imported; to import without a question add --yes")
        if not answer:
            print("nothing imported", file=sys.stderr)
            return 1
    if rows:

        async def add(catalog: PartnerCatalog, _: Store | None) -> Partner:
            return await catalog.add(plan.partner_id, import_files(plan))

        with_catalog(config, add)
        print(f"created {plan.partner_id} in the database")
        return 0
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    try:
        target = write_import(plan, root)
    finally:
        lock.release()
    print(f"created {plan.partner_id} in {target}")
    return 0


def _known_partner(config: Config) -> Callable[[str], bool]:
    """Whether a partner id is taken in the database (a directory of that name on this
    machine's disk does not count: it is read into the database only by a starting worker)."""
    catalog = load_catalog(config)
    return lambda partner_id: catalog.get(partner_id) is not None


def cmd_partners_export(config: Config, args: argparse.Namespace) -> int:
    out = Path(args.card)
    suffix = out.suffix.lower()
    if suffix not in (".png", ".json"):
        raise CardCommandError(f"{args.card}: the card must end in .png or .json")
    as_png = suffix == ".png"

    async def export(catalog: PartnerCatalog, store: Store | None) -> tuple[str, bytes]:
        partner = catalog.require(args.id)
        memory = memory_store(config, store) if store is not None else None
        if memory is None:
            return partner.id, await asyncio.to_thread(export_card, partner.dir, as_png)
        texts = {}
        for name in TEXT_FILES:
            data = (await memory.stored(MemoryFile(partner.dir, name))).data
            texts[name] = data.decode("utf-8", "replace")
        return partner.id, await asyncio.to_thread(export_partner, partner, texts, as_png)

    partner_id, data = with_catalog(config, export)
    out.write_bytes(data)
    print(f"wrote {partner_id} as a V3 card to {out}")
    return 0


SOURCE_WORLD = "source_world"
"""The ``extensions`` field naming the world an imported entry came from: importing that
world again replaces its entries instead of adding them twice."""


def cmd_lore_import(config: Config, args: argparse.Namespace) -> int:
    raw, name = _read(args.file)
    incoming = lore_from_file(raw, name)
    for note in incoming.notes:
        print(f"note: {terminal.printable(note)}", file=sys.stderr)
    world = str(incoming.book.get("name") or "").strip() or Path(name).stem
    entries = _tagged(incoming.book["entries"], world)

    async def merge(catalog: PartnerCatalog, _: Store | None) -> tuple[str, int, int]:
        partner = catalog.require(args.partner)
        counts: list[tuple[int, int]] = []

        def merged(data: bytes | None) -> bytes:
            where = f"{partner.id}'s {LOREBOOK_FILE}"
            body, kept, replaced = _merged(data, where, incoming.book, entries, world)
            counts.append((kept, replaced))
            return body

        await catalog.change_file(partner.id, LOREBOOK_FILE, merged)
        return partner.id, *counts[-1]

    if rows_configured(config):
        partner_id, kept, replaced = with_catalog(config, merge)
    else:
        lock = DataDirLock(config.data_dir)
        lock.acquire()
        try:
            partner_id, kept, replaced = with_catalog(config, merge)
        finally:
            lock.release()
    added, now = len(entries), kept + len(entries)
    shown = terminal.printable(world)
    if replaced:
        print(
            f"replaced the {replaced} entries of {shown!r} in {partner_id}'s {LOREBOOK_FILE} "
            f"with {added} (now {now})"
        )
    else:
        print(f"added {added} entries of {shown!r} to {partner_id}'s {LOREBOOK_FILE} (now {now})")
    return 0


def _tagged(entries: list[dict[str, Any]], world: str) -> list[dict[str, Any]]:
    """The entries, each marked with the world it came from."""
    tagged = []
    for entry in entries:
        extensions = entry.get("extensions")
        extensions = dict(extensions) if isinstance(extensions, dict) else {}
        tagged.append({**entry, "extensions": {**extensions, SOURCE_WORLD: world}})
    return tagged


def _from_world(entry: object, world: str) -> bool:
    extensions = entry.get("extensions") if isinstance(entry, dict) else None
    return isinstance(extensions, dict) and extensions.get(SOURCE_WORLD) == world


def _merged(
    data: bytes | None,
    where: str,
    incoming: dict[str, Any],
    entries: list[dict[str, Any]],
    world: str,
) -> tuple[bytes, int, int]:
    """The book with the new entries after the stored ones, which are kept as they are (a
    stored entry that no longer reads is still the owner's) but for those an earlier import
    of the same world brought; how many were kept and how many replaced."""
    book = parse_book(data, where) if data is not None else {"entries": []}
    kept = [entry for entry in book["entries"] if not _from_world(entry, world)]
    replaced = len(book["entries"]) - len(kept)
    if len(kept) + len(entries) > MAX_LORE_ENTRIES:
        raise CardCommandError(
            f"{where} has {len(kept):,} entries; with {len(entries):,} more it would be "
            f"over the limit of {MAX_LORE_ENTRIES:,}: remove some first"
        )
    if not book["entries"]:
        book.update({k: v for k, v in incoming.items() if k != "entries"})
    book["entries"] = [*kept, *entries]
    body = dump_book(book)
    if len(body) > MAX_LOREBOOK_BYTES:  # it would no longer load: the partner would lose it
        raise CardCommandError(
            f"{where} would be {len(body):,} bytes with these entries, over the limit of "
            f"{MAX_LOREBOOK_BYTES:,}: remove some first"
        )
    return body, len(kept), replaced


def lore_from_file(raw: bytes, name: str) -> CheckedBook:
    """A lorebook from world-info JSON, a ``character_book``, or a card that carries one."""
    if not raw.removeprefix(BOM).lstrip().startswith(b"{"):
        return _card_book(raw, name)
    document = parse_json(raw, name, MAX_LOREBOOK_BYTES, FIX_WORLD_INFO)
    if isinstance(document, dict) and "spec" in document:
        return _card_book(raw, name)
    if not isinstance(document, dict):
        raise CardError(f"{name}: not a lorebook: the JSON is not an object; {FIX_WORLD_INFO}")
    return from_world_info(document, name)


def _card_book(raw: bytes, name: str) -> CheckedBook:
    book = read_character(raw, name).data.get("character_book")
    if book is None:
        raise CardError(f"{name}: the card carries no lorebook")
    return check_book(book, f"{name}: character_book")
