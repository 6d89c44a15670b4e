"""Review state on PostgreSQL (see :mod:`bot.store.review`, whose SQLite twin this is). The
watermark and the failure count are one :func:`~bot.store.postgres.workers.fenced` statement
each, written only while the review's claim is held."""

from __future__ import annotations

import time

from bot.store.postgres.workers import FENCED, fenced, lease_lost, lease_values
from bot.store.rows import Lease, SessionRow
from bot.store.sessions import Sessions

REVIEW_SUCCEEDED = fenced(
    "done AS (UPDATE sessions SET reviewed_upto = GREATEST(reviewed_upto, $1),"
    " review_attempts = 0, review_error = NULL, review_due_at = NULL, reviewed_at = $2"
    f" WHERE id = $3 AND {FENCED})",
    params=3,
)
REVIEW_FAILED = fenced(
    "counted AS (UPDATE sessions SET review_attempts = review_attempts + 1,"
    f" review_error = $1, review_due_at = $2 WHERE id = $3 AND {FENCED}"
    " RETURNING review_attempts)",
    params=3,
    result="(SELECT review_attempts FROM counted) AS attempts",
)


class ReviewState(Sessions):
    """When sessions are due for review, and how their reviews went."""

    async def mark_review_due(self, session_id: str, at: float) -> None:
        """Ask for a review at ``at``; an earlier request stands (that is the debounce)."""
        await self._write(
            "UPDATE sessions SET review_due_at = $1 WHERE id = $2"
            " AND (review_due_at IS NULL OR review_due_at > $1)",
            at,
            session_id,
        )

    async def due_reviews(self, now: float) -> list[SessionRow]:
        return await self._sessions(
            "WHERE review_due_at IS NOT NULL AND review_due_at <= $1 ORDER BY review_due_at",
            now,
        )

    async def sessions_to_review(
        self, *, idle_before: float | None = None, partner_id: str | None = None
    ) -> list[SessionRow]:
        """Sessions holding conversation newer than their review watermark."""
        return await self._sessions(
            "WHERE kind = 'chat' AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id ="
            " sessions.id AND m.role IN ('user', 'assistant') AND m.id > sessions.reviewed_upto)"
            " AND ($1::double precision IS NULL"
            "      OR (last_active_at < $1 AND review_due_at IS NULL))"
            " AND partner_id IS NOT DISTINCT FROM coalesce($2, partner_id)"
            " ORDER BY last_active_at",
            idle_before,
            partner_id,
        )

    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None:
        row = await self._one(REVIEW_SUCCEEDED, upto, time.time(), session_id, *lease_values(claim))
        if claim is not None and (row is None or not row["held"]):
            raise lease_lost(claim)

    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        """Count a failed attempt (the watermark stays); returns the attempts so far."""
        row = await self._one(
            REVIEW_FAILED, error[:500], retry_at, session_id, *lease_values(claim)
        )
        if claim is not None and (row is None or not row["held"]):
            raise lease_lost(claim)
        return int(row["attempts"] or 0) if row else 0

    async def last_reviews(self) -> dict[str, float]:
        """When each partner's sessions were last reviewed."""
        rows = await self._all(
            "SELECT partner_id, MAX(reviewed_at) FROM sessions WHERE reviewed_at IS NOT NULL"
            " AND partner_id IS NOT NULL GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}
