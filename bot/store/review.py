"""Review state: each session's watermark (the last message reviewed into memory), the debounced
due time of its next review, and the count of failed attempts.

A review runs under a claim (a lease on ``review:<session id>``, :mod:`bot.store.workers`):
the watermark and the failure count are written only while that claim is held, so a worker
that lost it (paused, cut off) cannot advance a watermark another worker's review owns."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from bot.store.connection import SqliteBase
from bot.store.rows import Lease, SessionRow
from bot.store.sessions import Sessions
from bot.store.workers import check_lease


class ReviewState(SqliteBase, Sessions):
    """When sessions are due for review, and how their reviews went."""

    async def mark_review_due(self, session_id: str, at: float) -> None:
        """Ask for a review at ``at``; an earlier request stands (that is the debounce)."""
        await self._sqlite_write(
            "UPDATE sessions SET review_due_at = ? WHERE id = ?"
            " AND (review_due_at IS NULL OR review_due_at > ?)",
            (at, session_id, at),
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

    async def review_succeeded(
        self, session_id: str, upto: int, claim: Lease | None = None
    ) -> None:
        def succeeded(db: sqlite3.Connection) -> None:
            check_lease(db, claim)
            db.execute(
                "UPDATE sessions SET reviewed_upto = MAX(reviewed_upto, ?), review_attempts = 0,"
                " review_error = NULL, review_due_at = NULL, reviewed_at = ? WHERE id = ?",
                (upto, time.time(), session_id),
            )

        await self._in_one_trip(succeeded)

    async def review_failed(
        self, session_id: str, error: str, retry_at: float, claim: Lease | None = None
    ) -> int:
        """Count a failed attempt (the watermark stays); returns the attempts so far."""

        def failed(db: sqlite3.Connection) -> int:
            check_lease(db, claim)
            row = db.execute(
                "UPDATE sessions SET review_attempts = review_attempts + 1, review_error = ?,"
                " review_due_at = ? WHERE id = ? RETURNING review_attempts",
                (error[:500], retry_at, session_id),
            ).fetchone()
            return int(row[0]) if row else 0

        return await self._in_one_trip(failed)

    async def last_reviews(self) -> dict[str, float]:
        """When each partner's sessions were last reviewed."""
        rows = await self._sqlite_all(
            "SELECT partner_id, MAX(reviewed_at) FROM sessions WHERE reviewed_at IS NOT NULL"
            " AND partner_id IS NOT NULL GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}
