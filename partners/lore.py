"""Lorebooks (world info): entries of background text that come into a turn when the
conversation touches their keys. This module decides which entries fire; the file and the
per-partner loading are ``partners/lore_books.py``.

Matching folds case and accents like search does (``bot/store/search_terms.fold``) and finds every
key of every entry in one pass over the scanned text with an Aho-Corasick automaton built when
the book is loaded, so a 10,000-entry book costs well under a millisecond per turn. Keys are
matched as whole words unless an entry says otherwise (``match_whole_words: false``); keys in
CJK scripts, which have no spaces, match anywhere.

The work of a turn is linear in the text it scans, whatever the book holds: the messages, then
(with recursive scanning) at most ``MAX_RECURSION_STEPS`` rounds, each reading only the text of
the entries the round before brought into the turn within its token budget, all of a round as
one text. An automaton reports every key ending at each place, and keys are at most
``MAX_KEY_CHARS`` long (``partners/lore_format.py``), so overlapping keys ("w", "w w", …) cost
a bounded number of reports per character. :class:`ScanWork` counts it.

What fires goes into the turn after the frozen system prompt (``bot/turn/chat.py``), never into it,
so the prompt stays byte-identical and provider prompt caches keep hitting.
"""

from __future__ import annotations

import functools
import math
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal

import ahocorasick

from bot.store.search_terms import fold
from partners.lore_format import FIX_IMPORT, BookEntry, check_book

DEFAULT_BUDGET = 2048
"""Tokens a turn's entries may take when the caller does not say (a quarter of 8,192)."""
MAX_RECURSION_STEPS = 3
"""Rounds of entries activated by other entries' text, when the book scans recursively."""
DEFAULT_WHOLE_WORDS = True
""""cat" should not bring in the entry about cats when someone says "category"."""
LORE_FRAME = "World notes for this moment (background you know; not something anyone said):"

Position = Literal["before_char", "after_char"]
Logic = Literal["and_any", "not_all", "not_any", "and_all"]
LOGIC_BY_NUMBER: dict[int, Logic] = {0: "and_any", 1: "not_all", 2: "not_any", 3: "and_all"}
_SEPARATORS = re.compile(r"[\W_]+")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


@dataclass(frozen=True)
class LoreEntry:
    index: int
    label: str
    """What the owner calls it: its name or comment, else its first key."""
    keys: tuple[str, ...]
    secondary_keys: tuple[str, ...]
    selective: bool
    logic: Logic
    content: str
    constant: bool
    enabled: bool
    order: int
    priority: int
    position: Position
    probability: int
    case_sensitive: bool
    whole_words: bool
    exclude_recursion: bool
    """Not activated by another entry's text, only by the conversation."""
    prevent_recursion: bool
    """Its text does not activate other entries."""
    ignore_budget: bool
    """Goes into the turn however much of the budget is spent (SillyTavern's ``ignoreBudget``)."""
    tokens: int


@dataclass
class ScanWork:
    """What one :meth:`Lorebook.fire` cost, counted rather than timed. It grows with the
    text scanned, never with the number of entries or how their keys overlap."""

    rounds: int = 0
    """Scans: the messages, then one per recursion step."""
    matcher_calls: int = 0
    """Passes of an automaton over a text (two automata: folded keys and exact ones)."""
    chars: int = 0
    """Characters the automata read."""
    matches: int = 0
    """Keys the automata reported (one per key ending at each place)."""


@dataclass(frozen=True)
class Fired:
    entries: tuple[LoreEntry, ...]
    """In the order they go into the turn: before-the-persona ones first, each group in
    insertion order."""
    text: str
    """The message that goes into the turn ("" when nothing fired)."""
    work: ScanWork


def estimate_tokens(text: str) -> int:
    """About a token per four ASCII characters and one per other character (CJK): no
    tokenizer of the partner's model is at hand, and a budget only needs to be near."""
    ascii_chars = sum(1 for ch in text if ch < "\x80")
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


def _first_set(entry: bool | None, extension: bool | None, default: bool) -> bool:
    """A flag as the entry sets it, else as its extensions do, else the default."""
    if entry is not None:
        return entry
    return default if extension is None else extension


def parse_entry(index: int, entry: BookEntry) -> LoreEntry:
    """One checked ``character_book`` entry; SillyTavern's settings are read from its
    extensions."""
    ext = entry.extensions
    keys = tuple(k for k in entry.keys if k.strip())
    secondary = tuple(k for k in entry.secondary_keys if k.strip())
    raw_position = entry.position or ("after_char" if ext.position else "before_char")
    probability = ext.probability if ext.useProbability and ext.probability is not None else 100
    label = entry.name or entry.comment or (keys[0] if keys else f"#{index}")
    return LoreEntry(
        index=index,
        label=label,
        keys=keys,
        secondary_keys=secondary,
        selective=entry.selective and bool(secondary),
        logic=LOGIC_BY_NUMBER.get(ext.selectiveLogic, "and_any"),
        content=entry.content,
        constant=entry.constant,
        enabled=entry.enabled,
        order=entry.insertion_order,
        priority=entry.priority,
        position="after_char" if raw_position == "after_char" else "before_char",
        probability=max(0, min(100, probability)),
        case_sensitive=_first_set(entry.case_sensitive, ext.case_sensitive, False),
        whole_words=_first_set(entry.match_whole_words, ext.match_whole_words, DEFAULT_WHOLE_WORDS),
        exclude_recursion=ext.exclude_recursion,
        prevent_recursion=ext.prevent_recursion,
        ignore_budget=ext.ignore_budget,
        tokens=estimate_tokens(entry.content),
    )


class Lorebook:
    """A book's entries and the automata that find their keys, built once per load."""

    def __init__(self, book: object, where: str = "lorebook", fix: str = FIX_IMPORT) -> None:
        """``book`` as a ``character_book`` document; CardError if the book itself is wrong
        (``partners/lore_format.py``), its bad entries left out with a line in ``notes``."""
        checked = check_book(book, where, fix)
        self.notes = checked.notes
        self.name = checked.settings.name
        self.scan_depth = checked.settings.scan_depth
        self.recursive = checked.settings.recursive_scanning
        self.entries = tuple(parse_entry(i, e) for i, e in enumerate(checked.entries))
        self._folded = ahocorasick.Automaton()
        self._exact = ahocorasick.Automaton()
        self._constants = {e.index for e in self.entries if e.constant and e.enabled}
        self._needles: list[list[int]] = []
        """Needle id -> the entries whose primary key it is."""
        self._secondary: dict[int, list[int]] = {}
        """Entry index -> the needle ids of its secondary keys."""
        for entry in self.entries:
            if entry.enabled:
                self._add_keys(entry)
        for automaton in (self._folded, self._exact):
            if len(automaton):
                automaton.make_automaton()

    def _add_keys(self, entry: LoreEntry) -> None:
        """Each key into its automaton as a needle with an id; a primary key's needle lists
        the entries it fires, a secondary key's id is kept with its entry."""
        for secondary, keys in ((False, entry.keys), (True, entry.secondary_keys)):
            for key in keys:
                exact = entry.case_sensitive
                needle = _words(unicodedata.normalize("NFC", key) if exact else fold(key))
                if entry.whole_words and needle and not _CJK.search(needle):
                    needle = f" {needle} "  # the text is spaced the same way: whole words only
                needle_id = self._needle(self._exact if exact else self._folded, needle)
                if secondary:
                    self._secondary.setdefault(entry.index, []).append(needle_id)
                elif needle_id >= 0:
                    self._needles[needle_id].append(entry.index)

    def _needle(self, automaton: Any, needle: str) -> int:
        """The id of ``needle`` in ``automaton``, added if new (-1: an empty key, which
        matches nothing)."""
        if not needle.strip():
            return -1
        found = automaton.get(needle, None)
        if found is not None:
            return int(found)
        needle_id = len(self._needles)
        self._needles.append([])
        automaton.add_word(needle, needle_id)
        return needle_id

    def fire(
        self,
        messages: Sequence[str],
        chance: Callable[[], float] = random.random,
        budget: int = DEFAULT_BUDGET,
    ) -> Fired:
        """The entries the newest ``scan_depth`` of ``messages`` (oldest first) bring in,
        within ``budget`` tokens, and the text that carries them into the turn.

        With recursive scanning, each round scans only the text of the entries the round
        before brought in that made it into the turn (within the budget), once; an entry
        already in never comes again, and there are at most ``MAX_RECURSION_STEPS`` rounds.
        So a turn scans at most the messages plus that many budgets' worth of entry text,
        however large the book or however its keys overlap."""
        work = ScanWork()
        scanned = list(messages[-self.scan_depth :]) if self.scan_depth > 0 else []
        active = self._activated(self._found(scanned, work), set(), chance, by_recursion=False)
        seen = set(active)
        kept = self._within_budget(active, budget)
        lending = self._lending(active, kept)
        steps = 0
        while self.recursive and lending and steps < MAX_RECURSION_STEPS:
            steps += 1
            texts = [self.entries[i].content for i in lending]
            new = self._activated(self._found(texts, work), seen, chance, by_recursion=True)
            seen.update(new)
            active += new
            kept = self._within_budget(active, budget)
            lending = self._lending(new, kept)
        chosen = sorted(
            (self.entries[i] for i in kept),
            key=lambda e: (e.position != "before_char", e.order, e.index),
        )
        return Fired(tuple(chosen), render(chosen), work)

    def _lending(self, new: list[int], kept: set[int]) -> list[int]:
        """Which of the ``new`` entries' texts the next round scans: those in the turn
        whose text may fire others (and has any: each text read takes budget)."""
        return [
            i
            for i in new
            if i in kept and self.entries[i].tokens and not self.entries[i].prevent_recursion
        ]

    def _found(self, texts: Sequence[str], work: ScanWork) -> set[int]:
        """The ids of the needles (keys) found in ``texts``, read as one text per automaton:
        the matcher runs once a round, not once an entry; a key said a hundred times is one
        id."""
        work.rounds += 1
        found: set[int] = set()
        for automaton, prepared in ((self._folded, _folded), (self._exact, _exact)):
            if not len(automaton) or not texts:
                continue
            # a needle never holds a line break, so none matches across two texts
            text = "\n".join(prepared(t) for t in texts)
            hits = Counter(map(itemgetter(1), automaton.iter(text)))  # counted in C, no list
            work.matcher_calls += 1
            work.chars += len(text)
            work.matches += hits.total()
            found.update(hits)
        return found

    def _activated(
        self,
        found: set[int],
        seen: set[int],
        chance: Callable[[], float],
        by_recursion: bool,
    ) -> list[int]:
        """Entries that fire on the keys ``found`` (and the constant ones, but not by
        recursion), in book order; only entries one of whose keys was found are looked at,
        however big the book."""
        candidates = {index for needle in found for index in self._needles[needle]}
        if not by_recursion:
            candidates |= self._constants
        active = []
        for index in sorted(candidates - seen):
            entry = self.entries[index]
            if not entry.enabled:
                continue
            if by_recursion and (entry.exclude_recursion or entry.constant):
                continue
            if not (entry.constant or self._selected(entry, found)):
                continue
            if entry.probability < 100 and chance() * 100 >= entry.probability:
                continue
            active.append(index)
        return active

    def _selected(self, entry: LoreEntry, found: set[int]) -> bool:
        """A primary key was found; the selective logic on the secondary keys decides."""
        if not entry.selective:
            return True
        secondary = self._secondary.get(entry.index, [])
        matched = sum(1 for needle in secondary if needle in found)
        if entry.logic == "and_any":
            return matched > 0
        if entry.logic == "not_any":
            return matched == 0
        if entry.logic == "and_all":
            return matched == len(secondary)
        return matched < len(secondary)  # not_all

    def _within_budget(self, active: list[int], budget: int) -> set[int]:
        """Constant entries first, then by priority and insertion order, as SillyTavern
        spends its budget: an entry that would reach it is left out and so is every later
        one, but entries that ignore the budget come in all the same (and count)."""
        ranked = sorted(
            (self.entries[i] for i in active),
            key=lambda e: (not e.constant, -e.priority, e.order, e.index),
        )
        kept: set[int] = set()
        used = 0
        overflowed = False
        for entry in ranked:
            if overflowed and not entry.ignore_budget:
                continue
            used += entry.tokens
            if not entry.ignore_budget and used >= budget:
                overflowed = True
                continue
            kept.add(entry.index)
        return kept

    def too_large(self, budget: int) -> list[LoreEntry]:
        """Enabled entries that can never come into a turn within ``budget`` tokens."""
        return [e for e in self.entries if e.enabled and not e.ignore_budget and e.tokens >= budget]


@functools.lru_cache(maxsize=512)
def _folded(text: str) -> str:
    """A message folded like search folds it, and spaced for whole-word keys; cached, since
    each turn scans mostly the messages the turn before scanned."""
    folded = text.lower() if text.isascii() else fold(text)  # the same for ASCII, faster
    return f" {_words(folded)} "


@functools.lru_cache(maxsize=512)
def _exact(text: str) -> str:
    return f" {_words(unicodedata.normalize('NFC', text))} "


def _words(text: str) -> str:
    """``text`` with every run of characters that are not letters or digits as one space:
    keys and text spaced alike, so a key padded with spaces matches whole words only."""
    return _SEPARATORS.sub(" ", text).strip()


def render(entries: Sequence[LoreEntry]) -> str:
    if not entries:
        return ""
    return "\n\n".join([LORE_FRAME, *(entry.content.strip() for entry in entries)])
