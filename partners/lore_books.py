"""A partner's lorebook file and what a turn gets from it.

``lorebook.json``, one of the partner's own files, holds the character card spec's
``character_book`` (V3): the shape a card carries, so a card's book is stored as it came and
exported without loss, and one the owner can edit by hand or in a front-end's editor.
SillyTavern's standalone world-info files are converted to it on ``companion lore import``
(``partners/lore_format.py``, which checks every book that comes in).

:class:`LoreLibrary` loads each partner's book when its file changes (a file on disk, or a row
the catalog loaded: :meth:`partners.persona.Partner.file`) and gives a turn its note after the
conversation: the entries that fired (``partners/lore.py``) and the card's post-history
instructions (POST_HISTORY.md, read the same way). A stored book
that does not read (a hand edit, or one an older version stored unchecked) is skipped with one
warning per version of the file, and its entries of the wrong shape are left out with one
warning: a turn never fails for its lorebook.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config.model import Config
from partners.card_format import CardError, parse_json
from partners.lore import Lorebook
from partners.lore_format import MAX_LOREBOOK_BYTES, MAX_TOKEN_BUDGET
from partners.persona import CARD_FILE, Partner, fill_placeholders
from partners.persona import LOREBOOK_FILE as LOREBOOK_FILE
from partners.persona import POST_HISTORY_FILE as POST_HISTORY_FILE

logger = logging.getLogger(__name__)

FIX_STORED = "fix it there, or import the book again"


def lorebook_path(partner_dir: Path) -> Path:
    return partner_dir / LOREBOOK_FILE


def read_book(path: Path) -> dict[str, Any] | None:
    """The ``character_book`` in a lorebook file (None if there is none)."""
    if not path.exists():
        return None
    return parse_book(path.read_bytes(), str(path))


def book_of(partner: Partner) -> dict[str, Any] | None:
    """The partner's ``character_book`` as stored (None if it has none); blocking when its
    files are on disk."""
    data = partner.file(LOREBOOK_FILE)
    if data is None:
        return None
    return parse_book(data, f"{partner.id}/{LOREBOOK_FILE}")


def parse_book(data: bytes, where: str) -> dict[str, Any]:
    """A stored book: an object with a list of entries, each entry as it is in the file; a
    broken one names ``where`` it is."""
    book = parse_json(data, where, MAX_LOREBOOK_BYTES, FIX_STORED)
    if not isinstance(book, dict) or not isinstance(book.get("entries"), list):
        raise CardError(f"{where}: should be an object with a list of 'entries'; {FIX_STORED}")
    return book


DEFAULT_CONTEXT_TOKENS = 8192
"""The model's context window when neither ``[llm] context_tokens`` nor the partner's
``context_tokens`` says: small enough for any chat model in use."""
DEFAULT_BUDGET_PERCENT = 25
"""SillyTavern's default share of the context for world info."""


@dataclass(frozen=True)
class LoreBudget:
    """How many tokens a turn's lorebook entries may take, measured as SillyTavern measures
    it: a share of the model's context window, at most ``cap`` (0: no cap). A book's own
    ``token_budget`` plays no part, as in SillyTavern."""

    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    percent: int = DEFAULT_BUDGET_PERCENT
    cap: int = MAX_TOKEN_BUDGET

    @classmethod
    def configured(cls, config: Config) -> LoreBudget:
        shares = config.partners
        return cls(config.llm.context_tokens, shares.lore_budget_percent, shares.lore_budget_cap)

    def tokens(self, partner: Partner | None = None) -> int:
        """The budget for ``partner``'s turns (its own ``context_tokens`` if it sets one)."""
        own = partner.preset.context_tokens if partner is not None else None
        budget = max(1, round(self.percent * (own or self.context_tokens) / 100))
        return min(budget, self.cap) if self.cap > 0 else budget


DEFAULT_DEPTH = 4
"""Where SillyTavern puts a card's depth prompt when the card does not say."""
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class DepthNote:
    """A card's ``extensions.depth_prompt``: text placed among the conversation's messages,
    ``depth`` messages before its end (0: after the last), with its role, as SillyTavern
    places it."""

    depth: int
    role: str
    text: str


def depth_prompt(card: dict[str, Any]) -> tuple[int, str, str] | None:
    """(depth, role, text) of a card's depth prompt as SillyTavern reads it, None if it has
    none: depth 4 and the system role unless the card says otherwise."""
    extensions = card.get("extensions")
    found = extensions.get("depth_prompt") if isinstance(extensions, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("prompt"), str):
        return None
    if not found["prompt"].strip():
        return None
    depth = found.get("depth")
    if isinstance(depth, bool) or not isinstance(depth, int | float) or depth < 0:
        depth = DEFAULT_DEPTH
    role = found.get("role") if found.get("role") in ROLES else "system"
    return int(depth), str(role), found["prompt"]


_PLACEHOLDERS = re.compile(r"\{\{\s*(char|partner|user)\s*\}\}", re.IGNORECASE)


@dataclass(frozen=True)
class LastTurn:
    """What the lorebook did on a partner's last turn (``/admin lore``)."""

    chat_key: str
    at: float
    fired: tuple[str, ...]
    scanned: int


def too_large_notes(book: Lorebook, budget: int) -> list[str]:
    """A line for each entry of ``book`` that can never come into a turn."""
    return [
        f"entry {entry.label!r} ({entry.tokens:,} tokens) never fits the budget of "
        f"{budget:,} tokens; shorten it, or set its ignore_budget"
        for entry in book.too_large(budget)
    ]


class LoreLibrary:
    """Each partner's lorebook, loaded when its file changes, and the note a turn gets after
    the history: the entries that fired and the card's post-history instructions."""

    def __init__(self, budget: LoreBudget | None = None) -> None:
        self.budget = budget or LoreBudget()
        self._books: dict[str, tuple[str, Lorebook | None]] = {}
        self._depths: dict[str, tuple[str, tuple[int, str, str] | None]] = {}
        self.problems: dict[str, tuple[str, ...]] = {}
        """Partner id -> why its book is not used, or which entries were left out."""
        self.last: dict[str, LastTurn] = {}
        self.chance: Callable[[], float] = random.random
        """Rolls for entries with a probability under 100 (tests pin it)."""

    def book(self, partner: Partner) -> Lorebook | None:
        """The partner's lorebook as its file is now, None if it has none or it does not
        read (blocking reads when its files are on disk; call off-loop)."""
        stamp = partner.file_stamp(LOREBOOK_FILE)
        if stamp is None:
            self._books.pop(partner.id, None)
            self.problems.pop(partner.id, None)
            return None
        cached = self._books.get(partner.id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        loaded = self._load(partner)
        self._books[partner.id] = (stamp, loaded)
        return loaded

    def _load(self, partner: Partner) -> Lorebook | None:
        """The partner's book, each problem logged once (the caller caches by version)."""
        partner_id = partner.id
        try:
            where = f"{partner_id}/{LOREBOOK_FILE}"
            loaded = Lorebook(book_of(partner) or {"entries": []}, where, FIX_STORED)
        except (CardError, OSError) as exc:
            logger.warning("partner %s: lorebook not used: %s", partner_id, exc)
            self.problems[partner_id] = (str(exc),)
            return None
        self.problems[partner_id] = loaded.notes
        if loaded.notes:
            logger.warning(
                "partner %s: lorebook loaded with %d problems (/admin lore %s lists them); "
                "the first: %s",
                partner_id,
                len(loaded.notes),
                partner_id,
                loaded.notes[0],
            )
        return loaded

    def turn_note(
        self,
        partner: Partner,
        messages: Sequence[str],
        user: str,
        chat_key: str,
        now: float,
    ) -> str:
        """The text placed after the history this turn ("" if none): what fired, then the
        post-history instructions; blocking reads of files on disk."""
        parts = []
        book = self.book(partner)
        if book is not None:
            fired = book.fire(messages, self.chance, self.budget.tokens(partner))
            self.last[partner.id] = LastTurn(
                chat_key, now, tuple(e.label for e in fired.entries), len(book.entries)
            )
            if fired.text:
                parts.append(fired.text)
        post = partner.file(POST_HISTORY_FILE)
        instructions = post.decode("utf-8", "replace").strip() if post is not None else ""
        if instructions:
            parts.append(instructions)
        values = {"char": partner.name, "partner": partner.name, "user": user}
        return fill_placeholders("\n\n".join(parts), _PLACEHOLDERS, values, any_case=True)

    def depth_note(self, partner: Partner, user: str) -> DepthNote | None:
        """The card's depth prompt, its placeholders filled (None if it has none); read when
        card.json changes, blocking when it is a file on disk."""
        stamp = partner.file_stamp(CARD_FILE)
        cached = self._depths.get(partner.id)
        if cached is None or cached[0] != stamp:
            cached = (stamp or "", self._read_depth(partner))
            self._depths[partner.id] = cached
        if cached[1] is None:
            return None
        depth, role, text = cached[1]
        values = {"char": partner.name, "partner": partner.name, "user": user}
        return DepthNote(depth, role, fill_placeholders(text, _PLACEHOLDERS, values, any_case=True))

    def _read_depth(self, partner: Partner) -> tuple[int, str, str] | None:
        raw = partner.file(CARD_FILE)
        if raw is None:
            return None
        try:
            card = parse_json(raw, f"{partner.id}/{CARD_FILE}", MAX_LOREBOOK_BYTES, FIX_STORED)
        except CardError as exc:
            logger.warning("partner %s: depth prompt not used: %s", partner.id, exc)
            return None
        return depth_prompt(card) if isinstance(card, dict) else None
