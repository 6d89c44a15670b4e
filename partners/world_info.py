"""SillyTavern world-info files (``companion lore import``), read as a checked
``character_book``.

A world-info file keeps its entries in an object by uid, under SillyTavern's own field names
(``key``, ``keysecondary``, ``disable``, numbered positions). Each entry is checked as a
:class:`partners.lore_format.WorldInfoEntry` (a bad one is left out with a note, as in any
book), then converted the way SillyTavern converts a world it embeds in a card, and the
resulting book is checked by :func:`partners.lore_format.check_book` like every other.
"""

from __future__ import annotations

from typing import Any

from partners.card_format import CardError
from partners.lore_format import (
    FIX_IMPORT,
    MAX_LORE_ENTRIES,
    CheckedBook,
    WorldInfoEntry,
    check_book,
    checked_entry,
)

FIX_WORLD_INFO = "give a SillyTavern world-info file, a character_book or a card"

_WORLD_INFO_EXTENSIONS = {
    "position": "position",
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "probability": "probability",
    "useProbability": "useProbability",
    "depth": "depth",
    "selectiveLogic": "selectiveLogic",
    "group": "group",
    "scan_depth": "scanDepth",
    "match_whole_words": "matchWholeWords",
    "case_sensitive": "caseSensitive",
}
"""``extensions`` name in a character_book -> the world-info field it comes from."""


def from_world_info(document: dict[str, Any], where: str) -> CheckedBook:
    """A SillyTavern world-info file as a checked ``character_book`` (or a book given as one),
    converted the way SillyTavern converts a world it embeds in a card."""
    entries = document.get("entries")
    if isinstance(entries, list):
        return check_book(document, where)
    if not isinstance(entries, dict):
        raise CardError(f"{where}: not a lorebook: no 'entries'; {FIX_WORLD_INFO}")
    if len(entries) > MAX_LORE_ENTRIES:
        raise CardError(
            f"{where}: {len(entries)} entries is over the limit of {MAX_LORE_ENTRIES}; {FIX_IMPORT}"
        )
    notes: list[str] = []
    book_entries = []
    for number, raw in enumerate(entries.values(), 1):
        item = checked_entry(WorldInfoEntry, raw, f"{where}: entry {number}", notes)
        if item is not None:
            book_entries.append(_world_info_entry(item))
    name = document.get("name")
    book = {"name": name if isinstance(name, str) else "", "entries": book_entries}
    checked = check_book(book, where)
    return CheckedBook(checked.book, checked.settings, checked.entries, (*notes, *checked.notes))


def _world_info_entry(item: WorldInfoEntry) -> dict[str, Any]:
    given = item.model_dump(exclude_unset=True)
    extensions = {
        name: given[source]
        for name, source in _WORLD_INFO_EXTENSIONS.items()
        if given.get(source) is not None
    }
    return {
        "id": item.uid,
        "keys": item.key,
        "secondary_keys": item.keysecondary,
        "comment": item.comment,
        "content": item.content,
        "constant": item.constant,
        "selective": item.selective,
        "insertion_order": item.order,
        "enabled": not item.disable,
        "position": _after_or_before(item.position),
        "extensions": extensions,
    }


def _after_or_before(position: int | str) -> str:
    """Every place of SillyTavern's but the first comes after the persona here."""
    if isinstance(position, str):
        return "after_char" if position == "after_char" else "before_char"
    return "after_char" if position else "before_char"
