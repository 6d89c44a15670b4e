"""The store's rows for search and semantic recall: a search hit, the background embedder's work,
vectors as stored, cached and changed (``bot/store/search.py``, ``bot/store/vectors.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SearchHit:
    message_id: int
    session_title: str
    role: str
    text: str
    created_at: float
    platform_message_id: str | None
    score: float = field(default=0.0, compare=False)
    """Its lexical score (BM25, higher is better; 0 when found otherwise): what fusion
    normalises. Left out of equality: both backends rank alike, but their sums of doubles
    may differ in the last bits."""
    speaker: str = field(default="", compare=False)
    """Who said it (lexical hits only): tells a search which query words are names."""


@dataclass(frozen=True)
class EmbeddingWork:
    """The background embedder's next batch: (message id, text) pairs, and the watermark
    to record once they are embedded."""

    texts: tuple[tuple[int, str], ...]
    upto: int


@dataclass(frozen=True)
class NewVector:
    """A message's vector (float32 bytes), with the text it was made from."""

    message_id: int
    text: str
    dim: int
    vector: bytes


@dataclass(frozen=True)
class StoredVector:
    """A vector as the in-memory vector cache keeps it: its message, that message's scope
    token, time and speaker (what a search filters by), and the float32 bytes."""

    message_id: int
    scope: str
    created_at: float
    speaker: str
    vector: bytes


@dataclass(frozen=True)
class VectorChanges:
    """What the vector log says changed after a position: ``seq`` is its position now;
    ``message_ids`` the messages whose vector (or pending state) changed since, or None when
    the log no longer reaches back that far (whoever cached vectors must read them again)."""

    seq: int
    message_ids: tuple[int, ...] | None
