"""Proactive check-ins and dated reminders that cost nothing while there is nothing to say.

Off by default twice over: a partner enables them in preset.yml and each user opts in with
``/checkins on``. Every gate is checked in code before any model call — the partner's window
and the user's quiet hours (in the user's time zone), the user's recent activity, an unanswered
check-in, daily and weekly caps, the partner's token budget. Only when all pass is one small
model call made (persona, that user's memory, the last few turns), and the model may answer
with :data:`SILENCE`, which the delivery path removes so it is never shown.

preset.yml::

    proactive:
      enabled: true
      window: "10:00-20:00"      # when check-ins may go out, in the user's time zone
      quiet_hours: "22:00-08:00" # never then, whatever the window says
      max_per_day: 1             # in any 24 hours
      max_per_week: 2            # in any 7 days
      idle_hours: 24             # only after this long without a message from the user

Dated things a user mentioned (a birthday, an exam) come from the review as reminders: rows in
the store, scheduled as APScheduler date jobs at the start of the window on their day, fired
once (the row is closed atomically), skipped on a later day if the gateway was down.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from datetime import time as clock_time
from importlib import resources
from zoneinfo import ZoneInfo

from bot.services.llm import LLMClient, LLMError
from bot.store import CheckinCandidate, Store
from bot.text.markers import SILENCE, strip
from partners.catalog import PartnerCatalog
from partners.memory import MemoryFile, MemoryStore
from partners.memory_format import strip_ids
from partners.persona import Partner
from partners.tools import user_memory_file

logger = logging.getLogger(__name__)

RECENT_TURNS = 6
PERSONA_FILES = ("SYSTEM.md", "SOUL.md", "IDENTITY.md")
KIND_CHECKIN = "checkin"
KIND_REMINDER = "reminder"


class ProactiveError(ValueError):
    """preset.yml's proactive settings are unusable; check-ins stay off for that partner."""


def _span(text: str, key: str) -> tuple[clock_time, clock_time]:
    try:
        start, end = (clock_time.fromisoformat(part.strip()) for part in str(text).split("-"))
    except ValueError as exc:
        raise ProactiveError(f"proactive.{key} must look like '10:00-20:00', not {text!r}") from exc
    return start, end


def within(moment: clock_time, span: tuple[clock_time, clock_time]) -> bool:
    """Inside a daily span; spans may cross midnight (22:00-08:00)."""
    start, end = span
    return start <= moment < end if start <= end else moment >= start or moment < end


@dataclass(frozen=True)
class Proactive:
    enabled: bool = False
    window: tuple[clock_time, clock_time] = (clock_time(10), clock_time(20))
    quiet_hours: tuple[clock_time, clock_time] = (clock_time(22), clock_time(8))
    max_per_day: int = 1
    max_per_week: int = 2
    idle_hours: float = 24.0

    @classmethod
    def of(cls, partner: Partner) -> Proactive:
        raw = partner.preset.extra.get("proactive")
        if not isinstance(raw, dict):
            return cls()
        try:
            return cls(
                enabled=bool(raw.get("enabled", False)),
                window=_span(raw.get("window", "10:00-20:00"), "window"),
                quiet_hours=_span(raw.get("quiet_hours", "22:00-08:00"), "quiet_hours"),
                max_per_day=int(raw.get("max_per_day", 1)),
                max_per_week=int(raw.get("max_per_week", 2)),
                idle_hours=float(raw.get("idle_hours", 24)),
            )
        except (ProactiveError, TypeError, ValueError) as exc:
            logger.warning("partner %s: check-ins off: %s", partner.id, exc)
            return cls()


@dataclass(frozen=True)
class Candidate:
    user_key: str
    timezone: ZoneInfo
    last_message: float | None
    last_checkin: float | None
    today: int
    this_week: int


def blocked_by(settings: Proactive, user: Candidate, now: float, over_budget: bool) -> str | None:
    """Why no check-in goes to this user now, or None if every gate passes."""
    local = datetime.fromtimestamp(now, user.timezone).time()
    if within(local, settings.quiet_hours):
        return "quiet hours"
    if not within(local, settings.window):
        return "outside the window"
    if user.last_message is not None and now - user.last_message < settings.idle_hours * 3600:
        return "recently active"
    if user.last_checkin is not None and (
        user.last_message is None or user.last_message < user.last_checkin
    ):
        return "last check-in unanswered"
    if user.today >= settings.max_per_day:
        return "daily cap"
    if user.this_week >= settings.max_per_week:
        return "weekly cap"
    if over_budget:
        return "token budget"
    return None


Send = Callable[[Partner, str, str, str], Awaitable[bool]]
"""(partner, user key, text, kind) -> delivered; the gateway records and delivers it."""


class Checkins:
    def __init__(
        self,
        *,
        store: Store,
        catalog: PartnerCatalog,
        memory: MemoryStore,
        llm: LLMClient,
        default_model: str,
        default_timezone: Callable[[Partner], ZoneInfo],
        over_budget: Callable[[Partner], Awaitable[bool]],
        send: Send,
        usage_day: Callable[[float], str],
    ) -> None:
        """``usage_day`` names the day a moment's tokens are booked on (the owner's calendar,
        the one ``over_budget`` reads), whatever the partner's or the user's zone."""
        self.store = store
        self.catalog = catalog
        self.memory = memory
        self.llm = llm
        self.default_model = default_model
        self.default_timezone = default_timezone
        self.over_budget = over_budget
        self.send = send
        self.usage_day = usage_day
        self.clock: Callable[[], float] = time.time

    def user_timezone(self, partner: Partner, name: str | None) -> ZoneInfo:
        try:
            return ZoneInfo(name) if name else self.default_timezone(partner)
        except (ValueError, KeyError):
            return self.default_timezone(partner)

    async def run(self) -> dict[str, int]:
        """One pass over every partner with check-ins on; returns what happened, by reason."""
        outcome: dict[str, int] = {}
        now = self.clock()
        for partner in self.catalog.all():
            settings = Proactive.of(partner)
            if not settings.enabled:
                continue
            rows = await self.store.checkin_candidates(partner.id, now - 86400, now - 7 * 86400)
            budget_spent = await self.over_budget(partner) if rows else False
            for row in rows:
                reason = await self._one_user(partner, settings, row, now, budget_spent)
                outcome[reason] = outcome.get(reason, 0) + 1
        return outcome

    async def _one_user(
        self,
        partner: Partner,
        settings: Proactive,
        row: CheckinCandidate,
        now: float,
        budget_spent: bool,
    ) -> str:
        """One user's check-in, gates first; what breaks for one user never stops the pass."""
        try:
            user = self._candidate(partner, row)
            return blocked_by(settings, user, now, budget_spent) or await self._checkin(
                partner, user.user_key, KIND_CHECKIN, None
            )
        except Exception:
            logger.exception("check-in for %s by %s failed", row["user_key"], partner.id)
            return "failed"

    def _candidate(self, partner: Partner, row: CheckinCandidate) -> Candidate:
        return Candidate(
            row["user_key"],
            self.user_timezone(partner, row["timezone"]),
            row["last_message"],
            row["last_checkin"],
            row["today"],
            row["this_week"],
        )

    async def _checkin(self, partner: Partner, user_key: str, kind: str, about: str | None) -> str:
        """The one model call, then delivery; returns what happened."""
        try:
            text = await self._compose(partner, user_key, about)
        except LLMError as exc:
            logger.warning("check-in for %s by %s failed: %s", user_key, partner.id, exc)
            return "model failed"
        silent = not strip(text)
        await self.store.record_checkin(partner.id, user_key, kind, silent, self.clock())
        if silent:
            return "silent"
        return "sent" if await self.send(partner, user_key, strip(text), kind) else "undelivered"

    async def _compose(self, partner: Partner, user_key: str, about: str | None) -> str:
        files = [await self.memory.read(MemoryFile(partner.dir, name)) for name in PERSONA_FILES]
        persona = "\n\n".join(body for text in files if (body := strip_ids(text)))
        memory = strip_ids(await self.memory.read(user_memory_file(partner, user_key))).strip()
        recent = await self.store.user_messages(partner.id, user_key)
        turns = "\n".join(
            f"{m.speaker or m.role}: {m.text}"
            for m in recent[-RECENT_TURNS:]
            if m.role in ("user", "assistant")
        )
        template = (resources.files("partners") / "prompts" / "checkin.md").read_text("utf-8")
        task = template.replace("{{silence}}", SILENCE).replace(
            "{{occasion}}", f"Today is the day of: {about}" if about else "No special occasion."
        )
        context = f"{task}\n\n## What you remember about them\n{memory or '(nothing yet)'}"
        context += f"\n\n## Your last messages together\n{turns or '(none yet)'}"
        model = partner.preset.model or self.default_model
        completion = await self.llm.complete(
            [{"role": "system", "content": persona}, {"role": "user", "content": context}],
            model=model,
        )
        await self.store.add_usage(
            self.usage_day(self.clock()),
            partner.id,
            KIND_CHECKIN,
            completion.model,
            completion.usage.prompt_tokens,
            completion.usage.completion_tokens,
        )
        return completion.text.strip()

    # ---- reminders ---------------------------------------------------------------------

    def fire_at(self, partner: Partner, user_timezone: ZoneInfo, due: date) -> datetime:
        """When a reminder goes out: the start of the partner's window on its day."""
        start = Proactive.of(partner).window[0]
        return datetime.combine(due, start, tzinfo=user_timezone)

    async def fire_reminder(self, reminder_id: int) -> str:
        """Send one reminder once; the store row decides, so a restart cannot repeat it."""
        rows = [r for r in await self.store.pending_reminders() if r["id"] == reminder_id]
        if not rows:
            return "already handled"
        row = rows[0]
        partner = await self.catalog.find(row["partner_id"])
        setting = await self.store.checkin_setting(row["partner_id"], row["user_key"])
        if partner is None or not setting or not setting["enabled"]:
            await self.store.close_reminder(reminder_id, "skipped")
            return "check-ins off"
        if await self.over_budget(partner):
            await self.store.close_reminder(reminder_id, "skipped")
            return "token budget"
        if not await self.store.close_reminder(reminder_id, "sent"):
            return "already handled"
        return await self._checkin(partner, row["user_key"], KIND_REMINDER, row["about"])

    async def due_reminders(self) -> list[tuple[int, datetime]]:
        """Pending reminders with when to fire them; ones whose day has passed are closed."""
        schedule = []
        now = self.clock()
        for row in await self.store.pending_reminders():
            partner = self.catalog.get(row["partner_id"])
            if partner is None:
                continue
            user = await self.store.user(row["user_key"])
            zone = self.user_timezone(partner, user["timezone"] if user else None)
            due = date.fromisoformat(row["due_date"])
            if datetime.fromtimestamp(now, zone).date() > due:
                await self.store.close_reminder(row["id"], "missed")
                continue
            when = self.fire_at(partner, zone, due)
            schedule.append(
                (row["id"], max(when, datetime.fromtimestamp(now, zone) + timedelta(seconds=1)))
            )
        return schedule
