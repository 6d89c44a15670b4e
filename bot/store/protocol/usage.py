"""Usage and budgets: tokens and units (seconds, characters, images) per day, partner, kind and
model, the messages a user sent (rate limits) and when a "resting" notice was last sent.

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.usage.Usage`."""

from __future__ import annotations

from typing import Protocol

from bot.store.admin_rows import RestNoticeRow, UsageRow
from bot.store.rows import NewUsage


class UsageStore(Protocol):
    """What the partners cost, and what the budgets and rate limits read."""

    async def add_usage(
        self, day: str, partner_id: str, kind: str, model: str, prompt: int, completion: int
    ) -> None: ...

    async def book_usage(self, usage: NewUsage) -> None:
        """One model call's tokens outside a turn's reply (a speak-gate call): per partner,
        kind and model, and on its scene's group if it has one, in one transaction."""

    async def group_tokens_on(self, group_key: str, day: str) -> int:
        """Tokens a group's scene spent on one day of its calendar."""

    async def add_units(
        self, day: str, partner_id: str, kind: str, model: str, units: float
    ) -> None:
        """Usage that is not tokens: transcribed seconds, spoken characters, images."""

    async def units_on(self, day: str) -> dict[str, dict[str, float]]:
        """Units (seconds, characters, images) used on one day, per partner and kind."""

    async def usage(self, since_day: str) -> list[UsageRow]: ...

    async def tokens_on(self, day: str) -> dict[str, int]:
        """Tokens (prompt + completion) used on one day, per partner."""

    async def user_messages_since(self, user_key: str, since: float) -> int: ...

    async def last_rest_notice(self, kind: str, subject: str) -> float | None: ...

    async def note_rest_notice(self, kind: str, subject: str) -> None: ...

    async def rest_notices_since(self, since: float) -> list[RestNoticeRow]: ...
