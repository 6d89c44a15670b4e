"""Review state: each session's watermark (the last message reviewed into memory), the debounced
due time of its next review, and the count of failed attempts. One query text for both
backends but for the two writes a review's claim fences: :class:`SqliteReviewState` here (a
check of the claim and the write in one transaction) and :mod:`bot.store.postgres.review`
(one fenced statement each).

A review runs under a claim (a lease on ``review:<session id>``, :mod:`bot.store.workers`):
the watermark and the failure count are written only while that claim is held, so a worker
that lost it (paused, cut off) cannot advance a watermark another worker's review owns."""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any

from bot.store.leases import check_lease
from bot.store.rows import SessionRow
from bot.store.sessions import Sessions
from bot.store.worker_rows import Lease

SUCCEEDED = (
    "UPDATE sessions SET reviewed_upto = {greatest}(reviewed_upto, ?1), review_attempts = 0,"
    " review_error = NULL, review_due_at = NULL, reviewed_at = ?2 WHERE id = ?3"
)
"""A review's success (``{greatest}``: the dialect's two-argument maximum)."""
FAILED = (
    "UPDATE sessions SET review_attempts = review_attempts + 1, review_error = ?1,"
    " review_due_at = ?2 WHERE id = ?3"
)
"""A review's failed attempt (the watermark stays)."""


class ReviewState(Sessions):
    """When sessions are due for review, and how their reviews went."""

    async def mark_review_due(self, session_id: str, at: float) -> None:
        """Ask for a review at ``at``; an earlier request stands (that is the debounce)."""
        await self._write(
            "UPDATE sessions SET review_due_at = ?1 WHERE id = ?2"
            " AND (review_due_at IS NULL OR review_due_at > ?1)",
            at,
            session_id,
        )

    async def due_reviews(self, now: float) -> list[SessionRow]:
        return await self._sessions(
            "WHERE review_due_at IS NOT NULL AND review_due_at <= ? ORDER BY review_due_at", now
        )

    async def sessions_to_review(
        self, *, idle_before: float | None = None, partner_id: str | None = None
    ) -> list[SessionRow]:
        """Sessions holding conversation newer than their review watermark."""
        where = (
            "WHERE kind = 'chat' AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id ="
            " sessions.id AND m.role IN ('user', 'assistant') AND m.id > sessions.reviewed_upto)"
        )
        params: list[Any] = []
        if idle_before is not None:
            where += " AND last_active_at < ? AND review_due_at IS NULL"
            params.append(idle_before)
        if partner_id is not None:
            where += " AND partner_id = ?"
            params.append(partner_id)
        return await self._sessions(where + " ORDER BY last_active_at", *params)

    @abstractmethod
    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None: ...

    @abstractmethod
    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        """Count a failed attempt (the watermark stays); returns the attempts so far."""

    async def last_reviews(self) -> dict[str, float]:
        """When each partner's sessions were last reviewed."""
        rows = await self._all(
            "SELECT partner_id, MAX(reviewed_at) FROM sessions WHERE reviewed_at IS NOT NULL"
            " AND partner_id IS NOT NULL GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}


class SqliteReviewState(ReviewState):
    """SQLite's fenced review writes: the claim checked and the write made in one
    transaction (one process writes the file, so nothing can take the claim in between)."""

    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None:
        async with self._transaction() as tx:
            await check_lease(tx, claim)
            await tx.write(SUCCEEDED.format(greatest="MAX"), upto, time.time(), session_id)

    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        async with self._transaction() as tx:
            await check_lease(tx, claim)
            attempts = await tx.value(
                FAILED + " RETURNING review_attempts", error[:500], retry_at, session_id
            )
        return int(attempts or 0)
