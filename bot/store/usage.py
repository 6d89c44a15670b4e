"""Usage and budgets: tokens and units (seconds, characters, images) per day, partner, kind and
model, the messages a user sent (rate limits) and when a "resting" notice was last sent."""

from __future__ import annotations

import time
from typing import cast

from bot.store.connection import SqliteBase
from bot.store.rows import RestNoticeRow, UsageRow

ADD_USAGE = (
    "INSERT INTO usage (day, partner_id, kind, model, calls, prompt_tokens,"
    " completion_tokens) VALUES (?, ?, ?, ?, 1, ?, ?)"
    " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = calls + 1,"
    " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = completion_tokens + excluded.completion_tokens"
)
"""Book one model call's tokens (day, partner, kind, model, prompt, completion)."""


class Usage(SqliteBase):
    """Usage counters and resting notices."""

    async def add_usage(
        self, day: str, partner_id: str, kind: str, model: str, prompt: int, completion: int
    ) -> None:
        await self._sqlite_write(ADD_USAGE, (day, partner_id, kind, model, prompt, completion))

    async def add_units(
        self, day: str, partner_id: str, kind: str, model: str, units: float
    ) -> None:
        """Usage that is not tokens: transcribed seconds, spoken characters, images."""
        await self._sqlite_write(
            "INSERT INTO usage (day, partner_id, kind, model, calls, units)"
            " VALUES (?, ?, ?, ?, 1, ?)"
            " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = calls + 1,"
            " units = units + excluded.units",
            (day, partner_id, kind, model, units),
        )

    async def units_on(self, day: str) -> dict[str, dict[str, float]]:
        """Units (seconds, characters, images) used on one day, per partner and kind."""
        rows = await self._sqlite_all(
            "SELECT partner_id, kind, SUM(units) FROM usage WHERE day = ? AND units > 0"
            " GROUP BY partner_id, kind",
            (day,),
        )
        found: dict[str, dict[str, float]] = {}
        for row in rows:
            found.setdefault(row[0], {})[row[1]] = float(row[2] or 0)
        return found

    async def usage(self, since_day: str) -> list[UsageRow]:
        return [
            cast(UsageRow, dict(row))
            for row in await self._sqlite_all(
                "SELECT * FROM usage WHERE day >= ? ORDER BY day, partner_id, kind", (since_day,)
            )
        ]

    async def tokens_on(self, day: str) -> dict[str, int]:
        """Tokens (prompt + completion) used on one day, per partner."""
        rows = await self._sqlite_all(
            "SELECT partner_id, SUM(prompt_tokens + completion_tokens) FROM usage"
            " WHERE day = ? GROUP BY partner_id",
            (day,),
        )
        return {row[0]: int(row[1] or 0) for row in rows}

    async def user_messages_since(self, user_key: str, since: float) -> int:
        row = await self._sqlite_one(
            "SELECT COUNT(*) FROM messages WHERE user_key = ? AND created_at >= ?"
            " AND role = 'user'",
            (user_key, since),
        )
        return int(row[0]) if row else 0

    async def last_rest_notice(self, kind: str, subject: str) -> float | None:
        row = await self._sqlite_one(
            "SELECT sent_at FROM rest_notices WHERE kind = ? AND subject = ?", (kind, subject)
        )
        return float(row[0]) if row else None

    async def note_rest_notice(self, kind: str, subject: str) -> None:
        await self._sqlite_write(
            "INSERT OR REPLACE INTO rest_notices (kind, subject, sent_at) VALUES (?, ?, ?)",
            (kind, subject, time.time()),
        )

    async def rest_notices_since(self, since: float) -> list[RestNoticeRow]:
        rows = await self._sqlite_all(
            "SELECT kind, subject, sent_at FROM rest_notices WHERE sent_at >= ? ORDER BY sent_at",
            (since,),
        )
        return [cast(RestNoticeRow, dict(row)) for row in rows]
