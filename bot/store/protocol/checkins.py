"""Check-ins and reminders: a partner writing first to a user who opted in, and the dated
reminders a partner promised.

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.checkins.Checkins`."""

from __future__ import annotations

from typing import Protocol

from bot.store.admin_rows import CheckinCandidate, CheckinSetting, ReminderRow


class CheckinsStore(Protocol):
    """Who opted in to check-ins, what was sent, and the reminders due."""

    async def set_checkins(
        self, partner_id: str, user_key: str, enabled: bool, reason: str | None = None
    ) -> None: ...

    async def checkin_candidates(
        self, partner_id: str, day_start: float, week_start: float
    ) -> list[CheckinCandidate]:
        """Every opted-in user of a partner with what the check-in gates need, in one query."""

    async def checkin_partners(self, user_key: str) -> list[str]: ...

    async def checkin_setting(self, partner_id: str, user_key: str) -> CheckinSetting | None: ...

    async def record_checkin(
        self, partner_id: str, user_key: str, kind: str, silent: bool, at: float
    ) -> None: ...

    async def checkins_since(self, partner_id: str, user_key: str, since: float) -> int:
        """Check-ins actually sent (not silent) since a time."""

    async def last_user_message_at(self, partner_id: str, user_key: str) -> float | None: ...

    async def add_reminder(
        self, partner_id: str, user_key: str, due_date: str, about: str
    ) -> bool: ...

    async def pending_reminders(self) -> list[ReminderRow]: ...

    async def close_reminder(self, reminder_id: int, status: str) -> bool:
        """Mark a reminder done; False if another run already did (it fires once)."""
