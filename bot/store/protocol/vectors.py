"""Semantic recall's storage: one vector per searchable message, the background embedder's work
and progress, and the vectors a search may compare, chosen by the lexical search's visibility
rule. The ``new_searchable`` wake-up is kept by both backends' search index
(:class:`bot.store.searchable.SearchableMessages`).

Part of :class:`bot.store.Store`; SQLite implements it in :class:`bot.store.vectors.Vectors`,
PostgreSQL in :class:`bot.store.postgres.vectors.Vectors`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from bot.store.search_rows import EmbeddingWork, NewVector, SearchHit, StoredVector, VectorChanges


class VectorsStore(Protocol):
    """Vectors of messages, the embedder's queue, and the candidates of a semantic search."""

    @property
    def new_searchable(self) -> asyncio.Event:
        """Set when a searchable message is stored or its text changes (the background
        embedder waits on it and clears it)."""
        ...

    async def embedding_work(self, model: str, limit: int) -> EmbeddingWork:
        """The background embedder's next batch of ``model``'s messages: every searchable
        message comes in one once (again when its text changes), even one whose transaction
        commits after a later message was embedded."""

    async def embedding_watermark(self, model: str) -> int: ...

    async def save_vectors(
        self, model: str, vectors: Sequence[NewVector], upto: int | None = None
    ) -> int:
        """Keep vectors whose messages still hold the text they were made from."""

    async def skip_embedding(self, message_ids: Sequence[int]) -> None: ...

    async def embedding_backlog(self, model: str) -> int: ...

    async def unembedded(
        self, model: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[tuple[int, str]]: ...

    async def unembedded_count(self, model: str, partner_id: str | None) -> int:
        """How many messages :meth:`unembedded` lists from the start (a reindex's total)."""

    async def vector_candidates(
        self,
        partner_id: str,
        audiences: Sequence[str] | None,
        model: str,
        dim: int,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[tuple[int, bytes]]:
        """The vectors a search may compare: the lexical search's visibility rule, in SQL."""

    async def search_hits(self, message_ids: Sequence[int]) -> dict[int, SearchHit]: ...

    async def vector_log_position(self) -> int:
        """Where the vector log stands now (read before the vectors it covers)."""

    async def vector_changes(self, after_seq: int) -> VectorChanges:
        """Messages whose vector or pending state changed after ``after_seq``."""

    async def stored_vectors(
        self,
        partner_id: str,
        model: str,
        dim: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        message_ids: Sequence[int] | None = None,
    ) -> list[StoredVector]:
        """A partner's searchable, finished messages' vectors of ``model`` and ``dim``, by id."""
