"""APScheduler wiring: the review sweep every minute, the nightly pass, check-ins, reminders.

Jobs only call into partners/ (review, consolidation). Reviews are only enqueued here: the
sweep marks idle sessions due and the nightly pass marks every session with unreviewed
conversation due; each worker's heartbeat claims due reviews and runs them
(:meth:`partners.review.Reviewer.sweep`), so a review never runs on the leader because it
leads, and never twice. Both coalesce, so a laptop waking from
sleep runs a missed job once, never a pile of them: the sweep within a short grace, the nightly
pass however late it is. The nightly pass also records per partner which day it did, so a
restart never runs it twice for one day.

The scheduler runs on the leader only (:mod:`bot.workers.worker`), started under the leader's epoch.
Each run is first recorded in the store (the job's name and the time it is due for) under that
epoch: a run some leader already recorded is skipped, and a leader that lost its leadership
records nothing and runs nothing, so no job runs twice across a failover. A run recorded by a
leader that died before finishing it is not run again; the sweep and check-ins come round
again within their period, a nightly pass so cut off waits for the next night (the reviews it
enqueued before dying still run).

What stays on the leader, and why it cannot run twice: the nightly consolidation and day line
(one per partner per day, recorded in ``job_runs`` and the partner's done-day setting), the
check-in pass (one ``job_runs`` row per 30-minute period; each check-in's own row records
that it went out) and each reminder (one ``job_runs`` row per reminder id, fired once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot.services.fault_log import FaultLog
from bot.store import Leader, LeaseLost, Store
from partners.checkins import Checkins
from partners.consolidate import Consolidator
from partners.review import Reviewer

logger = logging.getLogger(__name__)

NIGHTLY = "nightly"
SWEEP_SECONDS = 60
SWEEP_GRACE_SECONDS = 30
CHECKIN_SECONDS = 30 * 60


class ReminderPlans:
    """Where a review says it stored dated reminders, and the scheduler hears it. Built before
    both: the reviewer is handed :meth:`stored`, the scheduler this object, so neither is
    patched into the other afterwards. While the scheduler is not running (a worker that does
    not lead) there is nothing to plan on; the leader's plan-reminders job finds them."""

    def __init__(self) -> None:
        self._plan: Callable[[], Awaitable[int]] | None = None

    def follow(self, plan: Callable[[], Awaitable[int]]) -> None:
        self._plan = plan

    async def stored(self) -> None:
        if self._plan is not None:
            await self._plan()


class Scheduler:
    def __init__(
        self,
        reviewer: Reviewer,
        consolidator: Consolidator,
        checkins: Checkins,
        timezone: ZoneInfo,
        nightly: str,
        store: Store,
        plans: ReminderPlans,
        clock: Callable[[], float] = time.time,
    ) -> None:
        plans.follow(self.plan_reminders)  # reviews that store reminders have them planned
        self.store = store
        self.clock = clock
        self.reviewer = reviewer
        self.consolidator = consolidator
        self.checkins = checkins
        self.timezone = timezone
        self.nightly_at = nightly
        self._scheduler: AsyncIOScheduler | None = None
        self._leader: Leader | None = None
        self._faults: dict[str, FaultLog] = {}
        """Each job's faults (by the name the log gives it)."""

    def start(self, leader: Leader, reviews: bool = True) -> None:
        """Must run inside the event loop (AsyncIOScheduler binds to the running loop).
        Every run is fenced by ``leader``'s epoch. ``reviews=False`` (auto_memory off) leaves
        out the review sweep and nightly pass."""
        self._leader = leader
        scheduler = AsyncIOScheduler(timezone=self.timezone)
        if reviews:
            hour, minute = (int(part) for part in self.nightly_at.split(":"))
            scheduler.add_job(
                self.sweep,
                IntervalTrigger(seconds=SWEEP_SECONDS),
                id="review-sweep",
                coalesce=True,
                max_instances=1,
                misfire_grace_time=SWEEP_GRACE_SECONDS,
            )
            scheduler.add_job(
                self.nightly,
                CronTrigger(hour=hour, minute=minute, timezone=self.timezone),
                id=NIGHTLY,
                coalesce=True,
                max_instances=1,
                misfire_grace_time=None,
            )
        # a reminder set in a turn on another worker is planned here within a sweep's time
        scheduler.add_job(
            self._plan_reminders_job,
            IntervalTrigger(seconds=SWEEP_SECONDS),
            id="plan-reminders",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=SWEEP_GRACE_SECONDS,
        )
        scheduler.add_job(
            self.checkin_pass,
            IntervalTrigger(seconds=CHECKIN_SECONDS),
            id="checkins",
            coalesce=True,
            max_instances=1,
            misfire_grace_time=CHECKIN_SECONDS,
        )
        scheduler.start()
        self._scheduler = scheduler

    async def plan_reminders(self) -> int:
        """A date job per pending reminder (the store keeps them across restarts)."""
        if self._scheduler is None:
            return 0
        planned = await self.checkins.due_reminders()
        for reminder_id, when in planned:
            self._scheduler.add_job(
                self.fire_reminder,
                DateTrigger(when),
                args=[reminder_id],
                id=f"reminder-{reminder_id}",
                replace_existing=True,
                misfire_grace_time=None,
            )
        return len(planned)

    async def fire_reminder(self, reminder_id: int) -> None:
        async def fire() -> None:
            if await self._first_run("reminder", str(reminder_id)):
                await self.checkins.fire_reminder(reminder_id)

        await self._guarded("reminders", fire, about=f"reminder {reminder_id}")

    async def checkin_pass(self) -> None:
        async def run() -> None:
            if not await self._first_run("checkins", self._period(CHECKIN_SECONDS)):
                return
            outcome = await self.checkins.run()
            if outcome:
                logger.info("check-ins: %s", outcome)

        await self._guarded("check-in pass", run)

    async def _plan_reminders_job(self) -> None:
        async def plan() -> None:
            await self.plan_reminders()

        await self._guarded("reminder planning", plan)

    async def _guarded(
        self, job: str, work: Callable[[], Awaitable[None]], about: str = ""
    ) -> None:
        """Run one job's work, its run's record included: the edge of a scheduled job. A
        failure is logged here, once per episode of that job (a database away fails every
        run until it is back), and never reaches APScheduler, which logs each one."""
        faults = self._faults.setdefault(job, FaultLog(job, logger))
        try:
            await work()
        except Exception as exc:
            faults.failed(exc, about=about)
        else:
            faults.succeeded()

    def shutdown(self) -> None:
        self._leader = None  # a job still running records nothing more
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        self._scheduler = None

    async def _first_run(self, job: str, due: str) -> bool:
        """Record this run of ``job`` for ``due`` under the leader's epoch; False (skip it)
        if it ran already or this worker no longer leads."""
        leader = self._leader
        if leader is None:
            return False
        try:
            return await self.store.record_job_run(job, due, leader)
        except LeaseLost:
            logger.warning("%s for %s not run: another worker leads now", job, due)
            return False

    def _period(self, seconds: int) -> str:
        """The start of the period of ``seconds`` that now falls in (what a run is due for)."""
        start = int(self.clock()) // seconds * seconds
        return datetime.fromtimestamp(start, self.timezone).isoformat()

    def job(self, job_id: str) -> Job:
        if self._scheduler is None:
            raise RuntimeError("the scheduler is not running")
        found = self._scheduler.get_job(job_id)
        if found is None:
            raise KeyError(job_id)
        return found

    def next_runs(self) -> dict[str, datetime | None]:
        if self._scheduler is None:
            return {}
        return {job.id: job.next_run_time for job in self._scheduler.get_jobs()}

    async def sweep(self) -> None:
        """Mark idle sessions' reviews due; any worker's heartbeat runs them (as it does the
        debounced triggers, retries and reviews cut off by a restart)."""

        async def run() -> None:
            if await self._first_run("review-sweep", self._period(SWEEP_SECONDS)):
                await self.reviewer.enqueue_idle()

        await self._guarded("review sweep", run)

    async def nightly(self) -> None:
        day = datetime.fromtimestamp(self.clock(), self.timezone).date().isoformat()

        async def run() -> None:
            if not await self._first_run(NIGHTLY, day):
                return
            results = await self.consolidator.run_all()
            logger.info("nightly pass: %s", ", ".join(r.partner for r in results if not r.skipped))

        await self._guarded("nightly pass", run)
