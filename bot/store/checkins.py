"""Check-ins (a partner writing first to a user who opted in, partners/checkins.py) and the
dated reminders a partner promised."""

from __future__ import annotations

import time
from typing import cast

from bot.store.connection import SqliteBase
from bot.store.rows import CheckinCandidate, CheckinSetting, ReminderRow


class Checkins(SqliteBase):
    """Check-in settings and log, and reminders."""

    async def set_checkins(
        self, partner_id: str, user_key: str, enabled: bool, reason: str | None = None
    ) -> None:
        await self._sqlite_write(
            "INSERT INTO checkins (partner_id, user_key, enabled, disabled_reason)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (partner_id, user_key) DO UPDATE SET"
            " enabled = excluded.enabled, disabled_reason = excluded.disabled_reason",
            (partner_id, user_key, int(enabled), reason),
        )

    async def checkin_candidates(
        self, partner_id: str, day_start: float, week_start: float
    ) -> list[CheckinCandidate]:
        """Every opted-in user of a partner with what the check-in gates need, in one query."""
        rows = await self._sqlite_all(
            "SELECT c.user_key, u.timezone,"
            " (SELECT MAX(m.created_at) FROM messages m WHERE m.user_key = c.user_key"
            "   AND m.partner_id = c.partner_id AND m.role = 'user') AS last_message,"
            " (SELECT MAX(l.sent_at) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0) AS last_checkin,"
            " (SELECT COUNT(*) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0 AND l.sent_at >= ?) AS today,"
            " (SELECT COUNT(*) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0 AND l.sent_at >= ?) AS this_week"
            " FROM checkins c LEFT JOIN users u ON u.user_key = c.user_key"
            " WHERE c.partner_id = ? AND c.enabled = 1",
            (day_start, week_start, partner_id),
        )
        return [cast(CheckinCandidate, dict(row)) for row in rows]

    async def checkin_partners(self, user_key: str) -> list[str]:
        rows = await self._sqlite_all(
            "SELECT partner_id FROM checkins WHERE user_key = ? AND enabled = 1", (user_key,)
        )
        return [row[0] for row in rows]

    async def checkin_setting(self, partner_id: str, user_key: str) -> CheckinSetting | None:
        row = await self._sqlite_one(
            "SELECT * FROM checkins WHERE partner_id = ? AND user_key = ?", (partner_id, user_key)
        )
        return cast(CheckinSetting, dict(row)) if row else None

    async def record_checkin(
        self, partner_id: str, user_key: str, kind: str, silent: bool, at: float
    ) -> None:
        await self._sqlite_write(
            "INSERT INTO checkin_log (partner_id, user_key, kind, sent_at, silent)"
            " VALUES (?, ?, ?, ?, ?)",
            (partner_id, user_key, kind, at, int(silent)),
        )

    async def checkins_since(self, partner_id: str, user_key: str, since: float) -> int:
        """Check-ins actually sent (not silent) since a time."""
        row = await self._sqlite_one(
            "SELECT COUNT(*) FROM checkin_log WHERE partner_id = ? AND user_key = ?"
            " AND sent_at >= ? AND silent = 0",
            (partner_id, user_key, since),
        )
        return int(row[0]) if row else 0

    async def last_user_message_at(self, partner_id: str, user_key: str) -> float | None:
        row = await self._sqlite_one(
            "SELECT MAX(created_at) FROM messages WHERE partner_id = ? AND user_key = ?"
            " AND role = 'user'",
            (partner_id, user_key),
        )
        return float(row[0]) if row and row[0] is not None else None

    async def add_reminder(self, partner_id: str, user_key: str, due_date: str, about: str) -> bool:
        cursor = await self._sqlite_write(
            "INSERT OR IGNORE INTO reminders (partner_id, user_key, due_date, about, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (partner_id, user_key, due_date, about, time.time()),
        )
        return cursor.rowcount > 0

    async def pending_reminders(self) -> list[ReminderRow]:
        rows = await self._sqlite_all(
            "SELECT * FROM reminders WHERE status = 'pending' ORDER BY due_date"
        )
        return [cast(ReminderRow, dict(row)) for row in rows]

    async def close_reminder(self, reminder_id: int, status: str) -> bool:
        """Mark a reminder done; False if another run already did (it fires once)."""
        cursor = await self._sqlite_write(
            "UPDATE reminders SET status = ? WHERE id = ? AND status = 'pending'",
            (status, reminder_id),
        )
        return cursor.rowcount > 0
