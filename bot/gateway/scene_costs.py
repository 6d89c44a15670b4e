"""What a scene costs, and a group's daily token budget (``scene.daily_token_budget``).

Every turn of a scene is booked in the usage table under the kind ``scene`` (its partner's
row, so the partner's own ``daily_token_budget`` counts it as before), and every model call of
the speak gate under ``gate``; both are also booked on the scene's group, on the group's own
calendar: the day in the time zone of the partner bound there first (preset.yml ``timezone``),
else the owner's. ``/admin usage`` shows the kinds, ``/admin scene`` the group's day so far.

When a group has spent its budget for the day, its partners stop doing what nobody asked of
them: no partner hands another the turn, no lively partner joins, and with mention gating off
the talk nobody addressed is no longer answered. A message addressed to partners (a name,
"both of you", a reply, a mention) is still answered: the people in a group are never left
without an answer because the partners talked too much among themselves. (A partner's own
budget still makes it rest, as everywhere.) The budget is checked before each hand-over and
each join, from the tokens booked so far, so the turns already given when it runs out still
run: it is a daily limit, not a hard cap on the last tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.config.model import Config
from bot.gateway.scenes import is_scene
from bot.store import NewUsage, Store
from partners.persona import Partner

SCENE_KIND = "scene"
"""The usage kind of a scene's turns (partner to partner included)."""
GATE_KIND = "gate"
"""The usage kind of the speak gate's model calls."""


def group_of(platform: str, chat_id: str) -> str:
    """A group's key for its budget: the whole chat, its forum topics included."""
    return f"{platform}:{chat_id}"


class SceneCosts:
    """Books what scenes cost on their groups and says when a group's day is spent."""

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.clock: Callable[[], float] = time.time

    def zone(self, cast: Sequence[Partner]) -> ZoneInfo:
        """The group's time zone: its first bound partner's, else the owner's."""
        owner = self.config.owner_timezone()
        return cast[0].timezone(owner) if cast else owner

    def day(self, cast: Sequence[Partner]) -> str:
        """Today on the group's calendar."""
        return datetime.fromtimestamp(self.clock(), self.zone(cast)).date().isoformat()

    def scene_usage(self, usage: NewUsage, group: str, cast: Sequence[Partner]) -> NewUsage:
        """A scene turn's tokens: kind ``scene``, booked on its group's day too."""
        return replace(usage, kind=SCENE_KIND, group_key=group, group_day=self.day(cast))

    async def book_gate(
        self,
        group: str,
        cast: Sequence[Partner],
        partner_id: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
    ) -> None:
        """Book one model call of the speak gate (asked whether ``partner_id`` joins):
        kind ``gate`` for that partner, and on the group's day."""
        usage = NewUsage(
            self.config.usage_day(self.clock()), partner_id, GATE_KIND, model,
            prompt_tokens, completion_tokens, group, self.day(cast),
        )  # fmt: skip
        await self.store.book_usage(usage)

    async def spent_today(self, group: str, cast: Sequence[Partner]) -> int:
        return await self.store.group_tokens_on(group, self.day(cast))

    async def exhausted(self, group: str, cast: Sequence[Partner], spending: int = 0) -> bool:
        """Whether the group's scene has spent its budget today, counting ``spending`` tokens
        not booked yet (a turn's, booked with its reply); never without a budget, nor in a
        group with one partner: that is no scene."""
        budget = self.config.scene.daily_token_budget
        if not budget or not is_scene(cast):
            return False
        return await self.spent_today(group, cast) + spending >= budget

    async def may_answer_unaddressed(self, group: str, cast: Sequence[Partner]) -> bool:
        """Whether talk nobody addressed may still get an answer in this group today."""
        return not await self.exhausted(group, cast)
