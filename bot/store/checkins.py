"""Check-ins (a partner writing first to a user who opted in, partners/checkins.py) and the
dated reminders a partner promised. One query text for both backends."""

from __future__ import annotations

import time
from typing import cast

from bot.store.admin_rows import CheckinCandidate, CheckinSetting, ReminderRow
from bot.store.base import StoreBase


class Checkins(StoreBase):
    """Check-in settings and log, and reminders."""

    async def set_checkins(
        self, partner_id: str, user_key: str, enabled: bool, reason: str | None = None
    ) -> None:
        await self._write(
            "INSERT INTO checkins (partner_id, user_key, enabled, disabled_reason)"
            " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (partner_id, user_key) DO UPDATE SET"
            " enabled = excluded.enabled, disabled_reason = excluded.disabled_reason",
            partner_id, user_key, int(enabled), reason,
        )  # fmt: skip

    async def checkin_candidates(
        self, partner_id: str, day_start: float, week_start: float
    ) -> list[CheckinCandidate]:
        """Every opted-in user of a partner with what the check-in gates need, in one query."""
        rows = await self._all(
            "SELECT c.user_key, u.timezone,"
            " (SELECT MAX(m.created_at) FROM messages m WHERE m.user_key = c.user_key"
            "   AND m.partner_id = c.partner_id AND m.role = 'user') AS last_message,"
            " (SELECT MAX(l.sent_at) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0) AS last_checkin,"
            " (SELECT COUNT(*) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0 AND l.sent_at >= ?1) AS today,"
            " (SELECT COUNT(*) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0 AND l.sent_at >= ?2) AS this_week"
            " FROM checkins c LEFT JOIN users u ON u.user_key = c.user_key"
            " WHERE c.partner_id = ?3 AND c.enabled = 1",
            day_start, week_start, partner_id,
        )  # fmt: skip
        return [cast(CheckinCandidate, dict(row)) for row in rows]

    async def checkin_partners(self, user_key: str) -> list[str]:
        rows = await self._all(
            "SELECT partner_id FROM checkins WHERE user_key = ?1 AND enabled = 1", user_key
        )
        return [row[0] for row in rows]

    async def checkin_setting(self, partner_id: str, user_key: str) -> CheckinSetting | None:
        row = await self._one(
            "SELECT * FROM checkins WHERE partner_id = ?1 AND user_key = ?2", partner_id, user_key
        )
        return cast(CheckinSetting, dict(row)) if row else None

    async def record_checkin(
        self, partner_id: str, user_key: str, kind: str, silent: bool, at: float
    ) -> None:
        await self._write(
            "INSERT INTO checkin_log (partner_id, user_key, kind, sent_at, silent)"
            " VALUES (?1, ?2, ?3, ?4, ?5)",
            partner_id, user_key, kind, at, int(silent),
        )  # fmt: skip

    async def checkins_since(self, partner_id: str, user_key: str, since: float) -> int:
        """Check-ins actually sent (not silent) since a time."""
        row = await self._one(
            "SELECT COUNT(*) FROM checkin_log WHERE partner_id = ?1 AND user_key = ?2"
            " AND sent_at >= ?3 AND silent = 0",
            partner_id, user_key, since,
        )  # fmt: skip
        return int(row[0]) if row else 0

    async def last_user_message_at(self, partner_id: str, user_key: str) -> float | None:
        row = await self._one(
            "SELECT MAX(created_at) FROM messages WHERE partner_id = ?1 AND user_key = ?2"
            " AND role = 'user'",
            partner_id,
            user_key,
        )
        return float(row[0]) if row and row[0] is not None else None

    async def add_reminder(self, partner_id: str, user_key: str, due_date: str, about: str) -> bool:
        added = await self._write(
            "INSERT INTO reminders (partner_id, user_key, due_date, about, created_at)"
            " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
            partner_id, user_key, due_date, about, time.time(),
        )  # fmt: skip
        return added > 0

    async def pending_reminders(self) -> list[ReminderRow]:
        rows = await self._all(
            "SELECT * FROM reminders WHERE status = 'pending' ORDER BY due_date, id"
        )
        return [cast(ReminderRow, dict(row)) for row in rows]

    async def close_reminder(self, reminder_id: int, status: str) -> bool:
        """Mark a reminder done; False if another run already did (it fires once)."""
        closed = await self._write(
            "UPDATE reminders SET status = ?1 WHERE id = ?2 AND status = 'pending'",
            status,
            reminder_id,
        )
        return closed > 0
