"""Review state on PostgreSQL where its SQL differs (the rest is :mod:`bot.store.review`): the
watermark and the failure count are one :func:`~bot.store.postgres.workers.fenced` statement
each, written only while the review's claim is held."""

from __future__ import annotations

import time

from bot.store.base import numbered
from bot.store.leases import lease_lost
from bot.store.postgres.workers import FENCED, fenced, lease_values
from bot.store.review import FAILED, SUCCEEDED, ReviewState
from bot.store.worker_rows import Lease

REVIEW_SUCCEEDED = fenced(
    f"done AS ({numbered(SUCCEEDED.format(greatest='GREATEST'))} AND {FENCED})", params=3
)
REVIEW_FAILED = fenced(
    f"counted AS ({numbered(FAILED)} AND {FENCED} RETURNING review_attempts)",
    params=3,
    result="(SELECT review_attempts FROM counted) AS attempts",
)


class PostgresReviewState(ReviewState):
    """The review writes a claim fences, one statement each."""

    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None:
        row = await self._one(REVIEW_SUCCEEDED, upto, time.time(), session_id, *lease_values(claim))
        if claim is not None and (row is None or not row["held"]):
            raise lease_lost(claim)

    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        row = await self._one(
            REVIEW_FAILED, error[:500], retry_at, session_id, *lease_values(claim)
        )
        if claim is not None and (row is None or not row["held"]):
            raise lease_lost(claim)
        return int(row["attempts"] or 0) if row else 0
