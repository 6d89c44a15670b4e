"""A partner's lorebook file and what a turn gets from it.

``lorebook.json`` in the partner directory holds the character card spec's ``character_book``
(V3): the shape a card carries, so a card's book is stored as it came and exported without
loss, and one the owner can edit by hand or in a front-end's editor. SillyTavern's standalone
world-info files are converted to it on ``companion lore import`` the way SillyTavern itself
converts them when it embeds a world in a card (its own settings go into each entry's
``extensions``).

:class:`LoreLibrary` loads each partner's book when its file changes and gives a turn its note
after the conversation: the entries that fired (``partners/lore.py``) and the card's
post-history instructions.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from partners.card_format import CardError, check_book
from partners.lore import Lorebook
from partners.persona import Partner

logger = logging.getLogger(__name__)

LOREBOOK_FILE = "lorebook.json"


def lorebook_path(partner_dir: Path) -> Path:
    return partner_dir / LOREBOOK_FILE


def read_book(path: Path) -> dict[str, Any] | None:
    """The partner's ``character_book`` (None if it has none); a broken file names itself."""
    if not path.exists():
        return None
    try:
        book = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CardError(f"{path}: not valid JSON ({str(exc)[:100]}); fix it there") from None
    check_book(book, str(path))
    assert isinstance(book, dict)
    return book


def from_world_info(document: dict[str, Any], where: str) -> dict[str, Any]:
    """A SillyTavern world-info file as a ``character_book``, or a book given as one."""
    entries = document.get("entries")
    if isinstance(entries, list):
        check_book(document, where)
        return document
    if not isinstance(entries, dict):
        raise CardError(f"{where}: not a lorebook: no 'entries'")
    book_entries = []
    for number, item in enumerate(entries.values(), 1):
        if not isinstance(item, dict):
            raise CardError(f"{where}: entry {number} is not an object")
        book_entries.append(_world_info_entry(item))
    book: dict[str, Any] = {"name": document.get("name") or "", "entries": book_entries}
    check_book(book, where)
    return book


_WORLD_INFO_EXTENSIONS = (
    "position",
    "exclude_recursion",
    "prevent_recursion",
    "probability",
    "useProbability",
    "depth",
    "selectiveLogic",
    "group",
    "scan_depth",
    "match_whole_words",
    "case_sensitive",
)
_WORLD_INFO_NAMES = {
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "scan_depth": "scanDepth",
    "match_whole_words": "matchWholeWords",
    "case_sensitive": "caseSensitive",
}


def _world_info_entry(item: dict[str, Any]) -> dict[str, Any]:
    extensions = {}
    for name in _WORLD_INFO_EXTENSIONS:
        value = item.get(_WORLD_INFO_NAMES.get(name, name))
        if value is not None:
            extensions[name] = value
    return {
        "id": item.get("uid"),
        "keys": list(item.get("key") or []),
        "secondary_keys": list(item.get("keysecondary") or []),
        "comment": item.get("comment") or "",
        "content": item.get("content") or "",
        "constant": bool(item.get("constant")),
        "selective": bool(item.get("selective")),
        "insertion_order": int(item.get("order", 100) or 0),
        "enabled": not item.get("disable", False),
        "position": "after_char" if item.get("position") else "before_char",
        "extensions": extensions,
    }


POST_HISTORY_FILE = "POST_HISTORY.md"
_PLACEHOLDERS = re.compile(r"\{\{\s*(char|partner|user)\s*\}\}", re.IGNORECASE)


@dataclass(frozen=True)
class LastTurn:
    """What the lorebook did on a partner's last turn (``/admin lore``)."""

    chat_key: str
    at: float
    fired: tuple[str, ...]
    scanned: int


class LoreLibrary:
    """Each partner's lorebook, loaded when its file changes, and the note a turn gets after
    the history: the entries that fired and the card's post-history instructions."""

    def __init__(self) -> None:
        self._books: dict[str, tuple[tuple[int, int], Lorebook]] = {}
        self.last: dict[str, LastTurn] = {}
        self.chance: Callable[[], float] = random.random
        """Rolls for entries with a probability under 100 (tests pin it)."""

    def book(self, partner_id: str, partner_dir: Path) -> Lorebook | None:
        """The partner's lorebook as its file is now (blocking reads; call off-loop)."""
        path = lorebook_path(partner_dir)
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._books.pop(partner_id, None)
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._books.get(partner_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        book = read_book(path)
        loaded = Lorebook(book or {"entries": []})
        self._books[partner_id] = (stamp, loaded)
        return loaded

    def turn_note(
        self,
        partner: Partner,
        messages: Sequence[str],
        user: str,
        chat_key: str,
        now: float,
    ) -> str:
        """The text placed after the history this turn ("" if none); blocking file reads."""
        parts = []
        try:
            book = self.book(partner.id, partner.dir)
        except CardError as exc:  # the owner's hand edit broke it: the turn goes on without
            logger.warning("partner %s: lorebook not used: %s", partner.id, exc)
            book = None
        if book is not None:
            fired = book.fire(messages, self.chance)
            self.last[partner.id] = LastTurn(
                chat_key, now, tuple(e.label for e in fired.entries), len(book.entries)
            )
            if fired.text:
                parts.append(fired.text)
        post = partner.dir / POST_HISTORY_FILE
        if post.exists():
            instructions = post.read_text(encoding="utf-8").strip()
            if instructions:
                parts.append(instructions)
        values = {"char": partner.name, "partner": partner.name, "user": user}
        return _PLACEHOLDERS.sub(lambda m: values[m.group(1).lower()], "\n\n".join(parts))
