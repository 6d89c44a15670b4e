"""What history search is on every backend before any SQL: which messages are searchable, the
audience token and term tag an index term carries, each partner's search language and the
terms made with it, and the wake-up for the background embedder. The SQLite search
(:mod:`bot.store.search`) and the PostgreSQL one (:mod:`bot.store.postgres.search`) both
stand on :class:`SearchableMessages`, so the two index the same terms the same way."""

from __future__ import annotations

import asyncio
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol

from bot.store.base import Transaction
from bot.store.rows import NewMessage
from bot.store.search_terms import DEFAULT_LANGUAGE, index_terms

THREAD_ROLES = ("user", "assistant", "context")
"""Roles that make up a conversation thread: each one is its neighbours' context. (The
schema's triggers and partial index spell the same list.)"""
CONTEXT_WEIGHT = 0.5
"""BM25 weight of the neighbours' words against a message's own (1.0). Measured with
bench/recall.py: 0.3 to 0.8 are within 0.04 of each other; 0.5 is best or level on R@1 and
R@10 in every language there, and a message's own words still rank it above its neighbours."""
REINDEX_BATCH = 2000
"""Messages re-indexed per round trip when search terms are recomputed."""
SEARCHABLE_ROLES = ("user", "assistant", "context", "journal")
"""Roles partner_search can find; tool traffic and notices never are."""


def is_searchable(message: NewMessage) -> bool:
    """Whether partner_search can find this message (and semantic recall embeds it)."""
    return message.role in SEARCHABLE_ROLES and bool(message.partner_id)


def audience_token(partner_id: str, audience: str) -> str:
    """The index's scope column: one opaque token per (partner, audience), so a per-user
    search reads only that user's doclist, never the partner's whole history."""
    return "a" + hashlib.sha1(f"{partner_id}\x00{audience}".encode()).hexdigest()[:16]


def term_tag(scope: str) -> str:
    """The prefix of every index term of one scope token's messages: an index term is per
    audience, so a search reads only the postings of the audiences it may see. (Two audiences
    sharing a tag would only share doclists; the scope filter still keeps them apart.)"""
    return scope[1:9]


class _ReadsRows(Protocol):
    """What :meth:`SearchableMessages._load_search_languages` needs of its backend."""

    _languages: dict[str, str]

    async def _all(self, sql: str) -> list[Any]: ...


class SearchableMessages(ABC):
    """The backend-neutral half of a store's search, mixed in before the backend's base
    class (its ``__init__`` passes the backend's arguments on)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._languages: dict[str, str] = {}
        """Each partner's search language (stemmer); absent: the default."""
        self._new_searchable = asyncio.Event()

    @property
    def new_searchable(self) -> asyncio.Event:
        """Set when a searchable message is stored or its text changes: the background
        embedder waits on it (and clears it), so a new message gets its vector at once."""
        return self._new_searchable

    def _stored(self, messages: Sequence[NewMessage]) -> None:
        """Wake whoever waits for new searchable messages, if any of these is one."""
        if any(is_searchable(m) for m in messages):
            self._new_searchable.set()

    async def _load_search_languages(self: _ReadsRows) -> None:
        rows = await self._all("SELECT partner_id, language FROM search_languages")
        self._languages = {row[0]: row[1] for row in rows}

    def _language(self, partner_id: str | None) -> str:
        return self._languages.get(partner_id or "", DEFAULT_LANGUAGE)

    def _terms(self, text: str, partner_id: str | None, scope: str) -> str:
        """A message's index terms: stemmed in its partner's language, tagged with its scope."""
        return index_terms(text, self._language(partner_id), term_tag(scope))

    @abstractmethod
    async def _threads(self, tx: Transaction, where: str, *args: Any) -> list[tuple[str, str, str]]:
        """The conversation threads (chat, partner, audience) that rows matching ``where``
        belong to: what a change to those rows must rewrite with :meth:`_rewrite_neighbours`
        (the backend's search index answers)."""

    @abstractmethod
    async def _rewrite_neighbours(
        self, tx: Transaction, threads: Sequence[tuple[str, str, str]]
    ) -> int:
        """Set the context columns of every message of these threads to the terms of its
        neighbours as they stand now, inside ``tx`` (the backend's search index answers)."""

    def _changed_terms(self, rows: Sequence[Any]) -> list[tuple[str, int]]:
        """(terms, id) for each message row (id, partner_id, scope, text, terms) whose terms,
        made again in its partner's language now, differ from those stored."""
        return [
            (terms, row[0])
            for row in rows
            if (terms := self._terms(row[3], row[1], row[2])) != row[4]
        ]
