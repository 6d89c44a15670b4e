"""History search: best matches first among the audiences a caller may see, over terms made in
Python (:mod:`bot.store.search_terms`) so both backends index and rank alike; each partner's
search language.

Part of :class:`bot.store.Store`; SQLite implements it in :class:`bot.store.search.SearchIndex`,
PostgreSQL in :class:`bot.store.postgres.search.SearchIndex`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.store.search_rows import SearchHit


class SearchStore(Protocol):
    """Lexical search over a partner's history."""

    async def search(
        self,
        partner_id: str,
        query: str,
        audiences: Sequence[str] | None,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[SearchHit]:
        """Best matches first (BM25, newer first on ties) among the given audiences."""

    async def set_search_language(self, partner_id: str, language: str) -> int:
        """Stem this partner's history in ``language`` from now on (a Snowball name, see
        ``search_language``); a change re-indexes what is stored. Returns messages re-indexed."""

    async def search_scopes(self, partner_id: str, audiences: Sequence[str] | None) -> list[str]:
        """The scope tokens of the audiences a search may see (None: all of the partner's)."""
