"""Cost control: a partner's daily token budget and a user's hourly message limit.

Both are checked in the turn path before any model call (``TurnRunner``). When one is exceeded
the partner says a short in-character "resting" line once — preset.yml ``resting_message``, else
:data:`DEFAULT_RESTING_LINE` — and further messages are kept in the conversation but get neither
a model call nor another resting line until the limit resets: a partner's budget at midnight in
the owner's time zone (the usage table counts per day), a user's limit once their messages of
the last hour are back under it. The owner is never rate-limited; the owner's assistant has no
token budget (it is not a partner).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from bot.config.model import Config
from bot.gateway.scenes import PARTNER_SPEAKER
from bot.store import Store
from partners.persona import Partner

DEFAULT_RESTING_LINE = "I need to rest for a bit — let's talk again later."
HOUR_SECONDS = 3600.0
BUDGET = "budget"
RATE = "rate"


@dataclass(frozen=True)
class Rest:
    """The partner rests instead of answering."""

    reason: str
    """BUDGET (the partner's tokens for today are used up) or RATE (the user wrote too much)."""
    line: str | None
    """What the partner says; None once it has said so (the message gets no answer)."""


class Budget:
    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config
        self.clock: Callable[[], float] = time.time

    def today(self) -> str:
        """The usage day now (:meth:`Config.usage_day`): budgets reset at the owner's midnight."""
        return self.config.usage_day(self.clock())

    def day_start(self) -> float:
        now = datetime.fromtimestamp(self.clock(), self.config.owner_timezone())
        return now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()

    async def tokens_today(self) -> dict[str, int]:
        """Tokens per partner today, voice and images counted at their token rates."""
        tokens = dict(await self.store.tokens_on(self.today()))
        for partner_id, kinds in (await self.store.units_on(self.today())).items():
            tokens[partner_id] = tokens.get(partner_id, 0) + self.media_tokens(kinds)
        return tokens

    def media_tokens(self, units: dict[str, float]) -> int:
        """What seconds heard, characters spoken and images seen count for in a budget."""
        speech, llm = self.config.speech, self.config.llm
        return round(
            units.get("transcription", 0) / 60 * speech.budget_tokens_per_minute
            + units.get("speech", 0) / 1000 * speech.budget_tokens_per_thousand_chars
            + units.get("image", 0) * llm.budget_tokens_per_image
        )

    async def over_budget(self, partner: Partner) -> bool:
        limit = partner.preset.daily_token_budget
        if limit is None:
            return False
        return (await self.tokens_today()).get(partner.id, 0) >= limit

    async def messages_last_hour(self, user_key: str) -> int:
        return await self.store.user_messages_since(user_key, self.clock() - HOUR_SECONDS)

    async def rate_limited(self, user_key: str, is_owner: bool) -> bool:
        limit = self.config.access.user_messages_per_hour
        if limit <= 0 or is_owner or user_key.startswith(PARTNER_SPEAKER):
            return False  # a partner's words handed to another: the human message is counted
        # the message being answered is stored already, so it counts: more than the limit
        return await self.messages_last_hour(user_key) > limit

    async def check(
        self, partner: Partner | None, chat_key: str, user_key: str, is_owner: bool
    ) -> Rest | None:
        """None to go ahead; else how the partner rests (its line once per chat, or per user
        for the rate limit, until the limit resets)."""
        if partner is None:
            return None
        if await self.over_budget(partner):
            subject = f"{partner.id}|{chat_key}"
            return await self._rest(partner, BUDGET, subject, since=self.day_start())
        if await self.rate_limited(user_key, is_owner):
            since = self.clock() - HOUR_SECONDS
            return await self._rest(partner, RATE, f"{partner.id}|{user_key}", since=since)
        return None

    async def _rest(self, partner: Partner, reason: str, subject: str, since: float) -> Rest:
        last = await self.store.last_rest_notice(reason, subject)
        if last is not None and last >= since:
            return Rest(reason, None)
        await self.store.note_rest_notice(reason, subject)
        return Rest(reason, partner.preset.resting_message or DEFAULT_RESTING_LINE)

    async def rate_limited_users(self) -> list[str]:
        """Users who were told to wait within the last hour ("partner|user" subjects)."""
        rows = await self.store.rest_notices_since(self.clock() - HOUR_SECONDS)
        return [row["subject"] for row in rows if row["kind"] == RATE]
