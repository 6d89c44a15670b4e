"""Usage and budgets: tokens and units (seconds, characters, images) per day, partner, kind and
model, the messages a user sent (rate limits) and when a "resting" notice was last sent. One
query text for both backends."""

from __future__ import annotations

import time
from typing import cast

from bot.store.admin_rows import RestNoticeRow, UsageRow
from bot.store.base import StoreBase, Transaction
from bot.store.rows import NewUsage

ADD_USAGE = (
    "INSERT INTO usage AS u (day, partner_id, kind, model, calls, prompt_tokens,"
    " completion_tokens) VALUES (?, ?, ?, ?, 1, ?, ?)"
    " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = u.calls + 1,"
    " prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,"
    " completion_tokens = u.completion_tokens + excluded.completion_tokens"
)
"""Book one model call's tokens (day, partner, kind, model, prompt, completion)."""
ADD_GROUP_TOKENS = (
    "INSERT INTO group_usage AS g (group_key, day, tokens) VALUES (?, ?, ?)"
    " ON CONFLICT (group_key, day) DO UPDATE SET tokens = g.tokens + excluded.tokens"
)
"""Book tokens spent in a scene on its group's day (group key, day, tokens)."""


class Usage(StoreBase):
    """Usage counters and resting notices."""

    async def add_usage(
        self, day: str, partner_id: str, kind: str, model: str, prompt: int, completion: int
    ) -> None:
        await self._write(ADD_USAGE, day, partner_id, kind, model, prompt, completion)

    async def book_usage(self, usage: NewUsage) -> None:
        """One model call's tokens outside a turn's reply (a speak-gate call): per partner,
        kind and model, and on its scene's group if it has one, in one transaction."""

        async def book(tx: Transaction) -> None:
            await tx.write(ADD_USAGE, *usage.per_partner)
            if usage.group_key is not None:
                await tx.write(ADD_GROUP_TOKENS, *usage.per_group)

        await self._atomically(book)

    async def group_tokens_on(self, group_key: str, day: str) -> int:
        """Tokens a group's scene spent on one day of its calendar."""
        row = await self._one(
            "SELECT tokens FROM group_usage WHERE group_key = ?1 AND day = ?2", group_key, day
        )
        return int(row[0]) if row else 0

    async def add_units(
        self, day: str, partner_id: str, kind: str, model: str, units: float
    ) -> None:
        """Usage that is not tokens: transcribed seconds, spoken characters, images."""
        await self._write(
            "INSERT INTO usage AS u (day, partner_id, kind, model, calls, units)"
            " VALUES (?1, ?2, ?3, ?4, 1, ?5)"
            " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = u.calls + 1,"
            " units = u.units + excluded.units",
            day, partner_id, kind, model, units,
        )  # fmt: skip

    async def units_on(self, day: str) -> dict[str, dict[str, float]]:
        """Units (seconds, characters, images) used on one day, per partner and kind."""
        rows = await self._all(
            "SELECT partner_id, kind, SUM(units) FROM usage WHERE day = ?1 AND units > 0"
            " GROUP BY partner_id, kind",
            day,
        )
        found: dict[str, dict[str, float]] = {}
        for row in rows:
            found.setdefault(row[0], {})[row[1]] = float(row[2] or 0)
        return found

    async def usage(self, since_day: str) -> list[UsageRow]:
        rows = await self._all(
            "SELECT * FROM usage WHERE day >= ?1 ORDER BY day, partner_id, kind", since_day
        )
        return [cast(UsageRow, dict(row)) for row in rows]

    async def tokens_on(self, day: str) -> dict[str, int]:
        """Tokens (prompt + completion) used on one day, per partner."""
        rows = await self._all(
            "SELECT partner_id, SUM(prompt_tokens + completion_tokens) FROM usage"
            " WHERE day = ?1 GROUP BY partner_id",
            day,
        )
        return {row[0]: int(row[1] or 0) for row in rows}

    async def user_messages_since(self, user_key: str, since: float) -> int:
        row = await self._one(
            "SELECT COUNT(*) FROM messages WHERE user_key = ?1 AND created_at >= ?2"
            " AND role = 'user'",
            user_key,
            since,
        )
        return int(row[0]) if row else 0

    async def last_rest_notice(self, kind: str, subject: str) -> float | None:
        row = await self._one(
            "SELECT sent_at FROM rest_notices WHERE kind = ?1 AND subject = ?2", kind, subject
        )
        return float(row[0]) if row else None

    async def note_rest_notice(self, kind: str, subject: str) -> None:
        await self._write(
            "INSERT INTO rest_notices (kind, subject, sent_at) VALUES (?1, ?2, ?3)"
            " ON CONFLICT (kind, subject) DO UPDATE SET sent_at = excluded.sent_at",
            kind,
            subject,
            time.time(),
        )

    async def rest_notices_since(self, since: float) -> list[RestNoticeRow]:
        rows = await self._all(
            "SELECT kind, subject, sent_at FROM rest_notices WHERE sent_at >= ?1 ORDER BY sent_at",
            since,
        )
        return [cast(RestNoticeRow, dict(row)) for row in rows]
