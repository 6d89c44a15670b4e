"""Embedding vectors as the store keeps them, and the brute-force comparison of a query with
the stored ones.

A vector is stored unit-length as float32 bytes, so cosine similarity is a dot product. This
Python's sqlite3 cannot load extensions (no sqlite-vec), so a search scans: it reads the
vectors its asker may see (the store filters them in SQL first) and scores them all with one
numpy matrix product. Measured with bench/vectors.py (bench/README.md, "Recall"): numpy scores
10k vectors of 384 dimensions 15-50 times faster than pure Python (which needs most of a second
for them), so numpy is worth its dependency; reading the vectors out of SQLite costs more than
scoring them, which is why ``embeddings.max_scan`` bounds a scan.

Scores are summed by :func:`similarities` (numpy's own loops, one thread), not by a matrix
product: that goes to OpenBLAS, which splits it over every core and then keeps its threads
spinning for about a tenth of a second, at normal priority. The local embedder's thread runs
nicer (docs/local-embeddings.md), so the next search's query vector waited behind them: 18 ms
alone, 100 ms right after a scan (bench/README.md, "Recall"). The single-threaded sum is also
faster here, as scoring is bound by reading the matrix: 1.7 against 3-8 ms for 20k vectors of
384 dimensions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FLOAT32 = np.dtype("<f4")
MAX_DIMENSIONS = 16_384
"""The longest vector taken from an endpoint: the largest embedding models answer 4,096
numbers (OpenAI's largest 3,072); a longer answer is no embedding this store should keep."""


class BadVector(ValueError):
    """An endpoint answered something that is not a usable vector."""


def unit(values: object) -> np.ndarray:
    """``values`` scaled to length 1, as float32; raises BadVector unless they are a flat,
    non-empty list (or array) of at most MAX_DIMENSIONS finite numbers, not all zero. Strings,
    booleans, nulls and nested lists are no numbers here, although numpy would convert some."""
    if isinstance(values, list | tuple):
        if not values or len(values) > MAX_DIMENSIONS:
            raise BadVector(f"an embedding must hold 1 to {MAX_DIMENSIONS} numbers")
        try:
            values = np.asarray(values)
        except ValueError as exc:  # lists nested unevenly
            raise BadVector("an embedding must be a flat list of numbers") from exc
    if not isinstance(values, np.ndarray) or values.ndim != 1 or values.dtype.kind not in "iuf":
        raise BadVector("an embedding must be a flat list of numbers")
    vector = values.astype(FLOAT32)
    if not np.all(np.isfinite(vector)):  # a float64 past float32's range becomes infinite here
        raise BadVector("an embedding must hold finite numbers, not NaN or infinity")
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:
        raise BadVector("an embedding of length zero cannot be compared")
    return (vector / norm).astype(FLOAT32)


def pack(vector: np.ndarray) -> bytes:
    """The stored form: little-endian float32."""
    return vector.astype(FLOAT32).tobytes()


def nearest(
    query: np.ndarray, candidates: Sequence[tuple[int, bytes]], top: int
) -> list[tuple[int, float]]:
    """The ``top`` candidates (id, packed vector) most similar to ``query`` (a unit vector of
    the same dimension), best first (see :func:`best_first`), with their cosine similarity."""
    if not candidates or top < 1:
        return []
    ids = np.fromiter((c[0] for c in candidates), dtype=np.int64, count=len(candidates))
    matrix = np.frombuffer(b"".join(c[1] for c in candidates), dtype=FLOAT32)
    scores = similarities(matrix.reshape(len(candidates), query.size), query)
    return [(int(ids[i]), float(scores[i])) for i in best_first(scores, ids, top)]


def similarities(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with ``query``, on this thread alone (see the module
    docstring for why no BLAS)."""
    return np.einsum("ij,j->i", matrix, query)


def best_first(scores: np.ndarray, ids: np.ndarray, top: int) -> np.ndarray:
    """Positions of the ``top`` highest ``scores``, best first and, among equal scores (the
    same text twice has the same vector), the message stored later first, whatever order
    the rows are in; those <= 0 are left out: a vector pointing away from the query is no
    match at all. ``ids`` are the rows' message ids."""
    count = min(top, len(scores))
    if count < 1:
        return np.zeros(0, dtype=np.intp)
    last = len(scores) - count
    best = np.flatnonzero(scores >= np.partition(scores, last)[last])  # and any tied with it
    best = best[np.lexsort((-ids[best], -scores[best]))][:count]
    return best[scores[best] > 0]
