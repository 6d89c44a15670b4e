"""Semantic recall's vectors in memory: one float32 matrix per (partner, model, dimension),
with each row's message id, scope token, time and speaker.

Reading up to ``max_scan`` vector BLOBs out of SQLite on every search cost far more than
scoring them (bench/README.md, "Recall"). The cache reads a partner's vectors once, lazily, on
its first search, and then only what changed: before each search it asks the store's vector
log which messages' vectors were stored, replaced or deleted (a forgotten message, a changed
text, a new model) or which messages entered or left 'pending' since it last looked, drops
those rows and reads the ones that still exist. So a forgotten message's vector can never be
returned: its deletion is logged in the same transaction, and every search reads the log first.

Who may see what is still the store's rule: the store computes the asker's scope tokens
(:meth:`Store.search_scopes`) and which vectors count at all (searchable, finished messages:
:meth:`Store.stored_vectors`); the cache only keeps each row's token and compares. The SQL path
(:meth:`Store.vector_candidates`) is the reference, and the tests hold both to the same
candidates. Memory: 4 bytes per dimension per vector (154 MB per 100k vectors of 384
dimensions, 410 MB at 1024) plus 24 bytes of ids, times and codes; ``budget_bytes`` bounds the
whole cache (least recently searched partners are dropped first; a partner too large for it
alone is searched through SQL).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from bot.services.vectors import FLOAT32, best_first, similarities
from bot.store import Store, StoredVector

logger = logging.getLogger(__name__)

LOAD_BATCH = 5000
"""Vectors read per store round trip, so a first load never holds the database for long."""
ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
"""SQLite's NOCASE folds ASCII letters only; the speaker filter must match the same names."""
BYTES_PER_ROW = 8 + 4 + 8 + 4 + 1
"""Id, scope code, time, speaker code and the alive flag of one cached vector."""
SPAN_PER_ROW = 4
"""Scoring a stretch of the matrix in place costs about a sixth per row of copying rows out
first (100k rows 8 ms; 20k rows copied, then scored, 10 ms): a search scores the stretch its
rows span while that is at most this many times as long as they are many."""


@dataclass(frozen=True)
class VectorFilter:
    """What one search may compare: the asker's scope tokens (the store's rule), the
    optional date range and speaker, and how many of the newest at most."""

    scopes: Sequence[str]
    max_scan: int
    since: float | None = None
    until: float | None = None
    speaker: str | None = None


class PartnerVectors:
    """One (partner, model, dimension)'s vectors: rows in a matrix that grows by doubling;
    a removed row is marked dead and reused only when the matrix is compacted."""

    def __init__(self, dim: int, seq: int) -> None:
        self.dim = dim
        self.seq = seq
        """The vector log position these rows reflect."""
        self.count = 0
        self.matrix = np.zeros((0, dim), dtype=FLOAT32)
        self.ids = np.zeros(0, dtype=np.int64)
        self.scopes = np.zeros(0, dtype=np.int32)
        self.created = np.zeros(0, dtype=np.float64)
        self.speakers = np.zeros(0, dtype=np.int32)
        self.alive = np.zeros(0, dtype=bool)
        self.rows: dict[int, int] = {}
        """Message id -> row."""
        self._codes: dict[str, int] = {}
        """Scope tokens and folded speakers -> small integers (one table for both)."""

    @property
    def nbytes(self) -> int:
        return len(self.ids) * (self.dim * 4 + BYTES_PER_ROW)

    def code(self, text: str) -> int:
        return self._codes.setdefault(text, len(self._codes))

    def add(self, vectors: Iterable[StoredVector]) -> None:
        batch = list(vectors)
        self.remove(v.message_id for v in batch)
        first, self.count = self.count, self.count + len(batch)
        self._reserve(self.count)
        rows = slice(first, self.count)
        joined = b"".join(v.vector for v in batch)
        self.matrix[rows] = np.frombuffer(joined, dtype=FLOAT32).reshape(len(batch), self.dim)
        self.ids[rows] = [v.message_id for v in batch]
        self.scopes[rows] = [self.code(v.scope) for v in batch]
        self.created[rows] = [v.created_at for v in batch]
        self.speakers[rows] = [self.code("\0" + v.speaker.translate(ASCII_FOLD)) for v in batch]
        self.alive[rows] = True
        self.rows.update((v.message_id, row) for row, v in enumerate(batch, start=first))

    def remove(self, message_ids: Iterable[int]) -> None:
        for message_id in message_ids:
            row = self.rows.pop(message_id, None)
            if row is not None:
                self.alive[row] = False
        if self.count > 1024 and len(self.rows) < self.count // 2:
            self._compact()

    def visible(self, only: VectorFilter) -> np.ndarray:
        """Rows a search may compare, the newest ``max_scan`` (by message id) at most: the
        same choice as the store's SQL."""
        count = self.count
        scopes = [self._codes[s] for s in only.scopes if s in self._codes]
        mask = self.alive[:count] & np.isin(self.scopes[:count], scopes)
        if only.since is not None:
            mask &= self.created[:count] >= only.since
        if only.until is not None:
            mask &= self.created[:count] < only.until
        if only.speaker is not None:
            mask &= self.speakers[:count] == self._codes.get(
                "\0" + only.speaker.translate(ASCII_FOLD), -1
            )
        rows = np.flatnonzero(mask)
        if len(rows) > only.max_scan:
            rows = rows[np.argpartition(-self.ids[rows], only.max_scan - 1)[: only.max_scan]]
        return rows

    def nearest(self, query: np.ndarray, rows: np.ndarray, top: int) -> list[tuple[int, float]]:
        """The ``top`` of ``rows`` (from :meth:`visible`) most similar to ``query``, best
        first (as :func:`bot.services.vectors.nearest` ranks them). Only ``rows`` are ranked:
        when they are dense, the stretch of the matrix they span is scored in place (no copy)
        and only their own scores are kept; when they are few and spread out, they are copied
        and scored alone."""
        if len(rows) == 0 or top < 1:
            return []
        first, end = int(rows.min()), int(rows.max()) + 1
        if end - first <= SPAN_PER_ROW * len(rows):
            scores = similarities(self.matrix[first:end], query)[rows - first]
        else:
            scores = similarities(self.matrix[rows], query)
        ids = self.ids[rows]
        return [(int(ids[i]), float(scores[i])) for i in best_first(scores, ids, top)]

    def _reserve(self, size: int) -> None:
        if size <= len(self.ids):
            return
        capacity = max(size, 2 * len(self.ids), 64)
        self.matrix = _grown(self.matrix, capacity)
        self.ids = _grown(self.ids, capacity)
        self.scopes = _grown(self.scopes, capacity)
        self.created = _grown(self.created, capacity)
        self.speakers = _grown(self.speakers, capacity)
        self.alive = _grown(self.alive, capacity)

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive[: self.count])
        self.matrix = self.matrix[keep]
        self.ids = self.ids[keep]
        self.scopes = self.scopes[keep]
        self.created = self.created[keep]
        self.speakers = self.speakers[keep]
        self.alive = self.alive[keep]
        self.count = len(keep)
        self.rows = {int(m): row for row, m in enumerate(self.ids)}


def _grown(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


class VectorCache:
    """Every partner's cached vectors, loaded on first search and kept current by the
    store's vector log."""

    def __init__(self, store: Store, budget_bytes: int) -> None:
        self.store = store
        self.budget_bytes = budget_bytes
        self._partners: dict[tuple[str, str, int], PartnerVectors] = {}
        """In the order they were last searched (the last one most recently)."""
        self._too_large: set[tuple[str, str, int]] = set()
        self._lock = asyncio.Lock()

    async def nearest(
        self, partner_id: str, model: str, query: np.ndarray, top: int, only: VectorFilter
    ) -> list[tuple[int, float]] | None:
        """The ``top`` vectors most similar to ``query`` among those ``only`` lets the
        search compare; None when this partner's vectors do not fit the budget (search them
        through the store's SQL instead)."""
        async with self._lock:
            vectors = await self._current(partner_id, model, query.size)
            if vectors is None:
                return None
            rows = vectors.visible(only)
            # the matrix stays as it is while it is scored: the lock keeps syncs out
            return await asyncio.to_thread(vectors.nearest, query, rows, top)

    async def candidates(
        self, partner_id: str, model: str, dim: int, only: VectorFilter
    ) -> list[int] | None:
        """The message ids a search may compare, newest first (as the store's
        :meth:`~Store.vector_candidates` lists them), or None (see :meth:`nearest`)."""
        async with self._lock:
            vectors = await self._current(partner_id, model, dim)
            if vectors is None:
                return None
            return sorted((int(vectors.ids[r]) for r in vectors.visible(only)), reverse=True)

    async def _current(self, partner_id: str, model: str, dim: int) -> PartnerVectors | None:
        key = (partner_id, model, dim)
        if key in self._too_large:
            return None
        vectors = self._partners.pop(key, None)
        if vectors is not None:
            changes = await self.store.vector_changes(vectors.seq)
            if changes.message_ids is None:
                vectors = None
            else:
                await self._apply(vectors, key, changes.message_ids)
                vectors.seq = changes.seq
        if vectors is None:
            vectors = await self._load(key)
        if vectors.nbytes > self.budget_bytes:
            logger.warning(
                "partner %s's vectors (%d MB) exceed embeddings.cache_mb: searched in SQL",
                partner_id,
                vectors.nbytes // 2**20,
            )
            self._too_large.add(key)
            return None
        self._partners[key] = vectors
        self._evict()
        return vectors

    async def _load(self, key: tuple[str, str, int]) -> PartnerVectors:
        partner_id, model, dim = key
        vectors = PartnerVectors(dim, await self.store.vector_log_position())
        after = 0
        while batch := await self.store.stored_vectors(
            partner_id, model, dim, after_id=after, limit=LOAD_BATCH
        ):
            vectors.add(batch)
            after = batch[-1].message_id
        return vectors

    async def _apply(
        self, vectors: PartnerVectors, key: tuple[str, str, int], changed: Sequence[int]
    ) -> None:
        partner_id, model, dim = key
        vectors.remove(changed)
        for first in range(0, len(changed), LOAD_BATCH):
            ids = changed[first : first + LOAD_BATCH]
            vectors.add(await self.store.stored_vectors(partner_id, model, dim, message_ids=ids))

    def _evict(self) -> None:
        """Drop the least recently searched partners until the cache fits its budget."""
        while sum(v.nbytes for v in self._partners.values()) > self.budget_bytes:
            oldest = next(iter(self._partners))
            del self._partners[oldest]
