"""Review state: each session's watermark (the last message reviewed into memory), the debounced
due time of its next review and its failed attempts, written only under the review's claim when
one is given.

Part of :class:`bot.store.Store`, implemented once in :class:`bot.store.review.ReviewState`
(the fenced writes: :class:`bot.store.review.SqliteReviewState`,
:class:`bot.store.postgres.review.PostgresReviewState`)."""

from __future__ import annotations

from typing import Protocol

from bot.store.rows import SessionRow
from bot.store.worker_rows import Lease


class ReviewStore(Protocol):
    """How far each session's review has come and when the next one is due."""

    async def mark_review_due(self, session_id: str, at: float) -> None:
        """Ask for a review at ``at``; an earlier request stands (that is the debounce)."""

    async def due_reviews(self, now: float) -> list[SessionRow]: ...

    async def sessions_to_review(
        self, *, idle_before: float | None = None, partner_id: str | None = None
    ) -> list[SessionRow]:
        """Sessions holding conversation newer than their review watermark."""

    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None:
        """Advance the watermark to ``upto`` and clear the due time and the failures; with
        ``claim``, only while that review claim is held (:class:`LeaseLost` otherwise, and
        nothing is written)."""

    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        """Count a failed attempt (the watermark stays) and ask again at ``retry_at``; the
        attempts so far. With ``claim``, only while it is held (:class:`LeaseLost`)."""

    async def last_reviews(self) -> dict[str, float]:
        """When each partner's sessions were last reviewed."""
