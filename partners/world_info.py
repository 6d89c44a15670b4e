"""Lorebook files other apps write (``companion lore import``), read as a checked
``character_book``: SillyTavern world info, NovelAI ``.lorebook``, Agnai memory books and
RisuAI lorebook exports, told apart as SillyTavern tells them apart; a ``character_book``
given as it is; anything else refused, naming what was expected.

A world-info file keeps its entries in an object by uid, under SillyTavern's own field names
(``key``, ``keysecondary``, ``disable``, numbered positions). NovelAI, Agnai and RisuAI entries
are first turned into world-info entries the way SillyTavern's importer turns them. Each entry
is checked as a :class:`partners.lore_format.WorldInfoEntry` (a bad one is left out with a
note, as in any book), then converted the way SillyTavern converts a world it embeds in a
card, and the resulting book is checked by :func:`partners.lore_format.check_book` like every
other.
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
EXPECTED_SHAPES = (
    "a SillyTavern world-info file (entries by uid), a character_book (a list of entries with "
    "keys and content), a NovelAI .lorebook, an Agnai memory book, a RisuAI lorebook, or a card"
)

_WORLD_INFO_EXTENSIONS = {
    "position": "position",
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "ignore_budget": "ignoreBudget",
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
    """A lorebook file of any known shape as a checked ``character_book``, converted the way
    SillyTavern converts a world it embeds in a card; CardError naming the shapes expected."""
    converted = _other_app(document, where)
    if converted is not None:
        document = converted
    entries = document.get("entries")
    if isinstance(entries, list) and _book_entries(entries):
        return check_book(document, where)
    if not isinstance(entries, dict):
        raise CardError(f"{where}: not a lorebook of a known shape; expected {EXPECTED_SHAPES}")
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


def _book_entries(entries: list[Any]) -> bool:
    """Whether a list of entries is a character_book's: empty, or with some entry that has
    its content (NovelAI's and other apps' entries call it otherwise)."""
    return not entries or any(isinstance(e, dict) and "content" in e for e in entries)


def _other_app(document: dict[str, Any], where: str) -> dict[str, Any] | None:
    """NovelAI, Agnai and RisuAI books as a world-info document (None for any other), told
    apart as SillyTavern tells them apart."""
    if "lorebookVersion" in document:
        return _converted(document.get("entries"), _novelai_entry, document, where, "NovelAI")
    if document.get("kind") == "memory":
        return _converted(document.get("entries"), _agnai_entry, document, where, "Agnai")
    if document.get("type") == "risu":
        return _converted(document.get("data"), _risu_entry, document, where, "RisuAI")
    return None


def _converted(
    entries: object,
    convert: Any,
    document: dict[str, Any],
    where: str,
    app: str,
) -> dict[str, Any]:
    if not isinstance(entries, list):
        raise CardError(f"{where}: a {app} lorebook without its list of entries; {FIX_IMPORT}")
    if len(entries) > MAX_LORE_ENTRIES:
        raise CardError(
            f"{where}: {len(entries)} entries is over the limit of {MAX_LORE_ENTRIES}; {FIX_IMPORT}"
        )
    name = document.get("name")
    return {
        "name": name if isinstance(name, str) else "",
        "entries": {
            str(uid): convert(uid, raw) if isinstance(raw, dict) else raw
            for uid, raw in enumerate(entries)
        },
    }


def _novelai_entry(uid: int, entry: dict[str, Any]) -> dict[str, Any]:
    config = entry.get("contextConfig")
    priority = config.get("budgetPriority") if isinstance(config, dict) else None
    return {
        "uid": uid,
        "key": entry.get("keys"),
        "comment": entry.get("displayName"),
        "content": entry.get("text"),
        "order": 0 if priority is None else priority,
        "disable": entry.get("enabled") is False,
    }


def _agnai_entry(uid: int, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "uid": uid,
        "key": entry.get("keywords"),
        "comment": entry.get("name"),
        "content": entry.get("entry"),
        "order": entry.get("weight"),
        "disable": entry.get("enabled") is False,
    }


def _risu_entry(uid: int, entry: dict[str, Any]) -> dict[str, Any]:
    percent = entry.get("activationPercent")
    return {
        "uid": uid,
        "key": _split(entry.get("key")),
        "keysecondary": _split(entry.get("secondkey")),
        "comment": entry.get("comment"),
        "content": entry.get("content"),
        "constant": entry.get("alwaysActive"),
        "selective": entry.get("selective"),
        "order": entry.get("insertorder"),
        "probability": 100 if percent is None else percent,
    }


def _split(keys: object) -> object:
    """RisuAI's keys: one text, separated by commas."""
    if isinstance(keys, str):
        return [key.strip() for key in keys.split(",") if key.strip()]
    return [] if keys is None else keys
