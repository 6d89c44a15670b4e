"""Review: one LLM call turns a new part of a conversation into a journal entry and memory edits.

Triggers (docs/architecture.md "Review, consolidation and journals"): the end of a turn once enough
new human turns or characters piled up (debounced 5 s), before turns would leave the history
window, an idle session, ``/new``, and the nightly job. The watermark (last reviewed message)
advances only after a review succeeded; after 3 failed attempts it is forced forward, an audit row
is written and the owner is told (at most once per session per 10 minutes).

A trigger only marks the review due (a row, so a restart or another worker still runs it).
A review runs under a claim (:class:`ReviewClaims`, a lease in the store renewed by the
worker's heartbeat): one review of a session runs at a time across every worker on the
database, and its watermark and failure count are written only while its claim holds. Each
worker's heartbeat claims due reviews whose claim is free — never taken, given back, or
lapsed because its worker died — and runs them (:meth:`Reviewer.sweep`); the worker whose
turn asked for a review also tries to claim it once its debounce is over. A review cut off
before its watermark runs again over the same segment: its journal entry and its memory
edits carry the segment in their changelog ``source``, and a segment already written is not
written twice.

The model's answer is read in :mod:`partners.review_answer`, the prompt built in
:mod:`partners.review_prompt`, and what the answer writes (memory edits behind their guards,
the journal entry) in :mod:`partners.review_edits`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from bot.config.memory import MemoryConfig
from bot.services.llm import LLMClient, LLMError, storable
from bot.store import Lease, LeaseLost, MessageRow, SessionRow, Store, reviewed_session
from bot.text.literal import literal_line
from partners.catalog import PartnerCatalog
from partners.memory import MemoryStore
from partners.persona import Partner
from partners.review_answer import ReviewOutputError, ask_for_json, parse_reminders, parse_review
from partners.review_edits import apply_edits, writable_files, write_journal
from partners.review_prompt import review_prompt
from partners.review_scene import heard_segment

logger = logging.getLogger(__name__)

REVIEW_TIMEOUT_SECONDS = 120.0
DEBOUNCE_SECONDS = 5.0
MAX_ATTEMPTS = 3
RETRY_SECONDS = 60.0
OWNER_NOTICE_EVERY_SECONDS = 600.0
MIN_HUMAN_CHARS = 20
MAX_REASON_CHARS = 300
REVIEWS_AT_ONCE = 2
"""How many claimed reviews one worker runs at once (beside its turns: a review is one
model call, and a worker's sweep leaves the rest to the other workers)."""


@dataclass
class ReviewResult:
    """What one review did: whether it wrote a journal entry, the memory changes it made and
    the edits it left out (with why), the reminders it stored, or a note on why it stopped."""

    journal: bool = False
    changes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    reminders: list[str] = field(default_factory=list)
    note: str = ""


def still_due(session: SessionRow, by: float) -> bool:
    return session.review_due_at is not None and session.review_due_at <= by


Notify = Callable[[str, str], Awaitable[None]]


class ReviewClaims(Protocol):
    """Where reviews are claimed (:class:`bot.workers.worker.Worker`, under its id and leases)."""

    async def claim_review(self, session_id: str) -> Lease | None:
        """Claim one session's review; None while another review of it runs."""

    async def claim_due_reviews(self, due_by: float, limit: int) -> list[Lease]:
        """Claim up to ``limit`` reviews due by ``due_by`` that no worker runs."""

    async def keep_review(self, claim: Lease) -> None:
        """Raise :class:`LeaseLost` unless the claim still holds (it is renewed)."""

    async def release_review(self, claim: Lease) -> None:
        """Give the claim back (a claim already taken over is left alone)."""


class Reviewer:
    """Runs reviews: marks them due when a trigger fires, claims them, and runs one claimed
    review from its prompt to its watermark."""

    def __init__(
        self,
        *,
        store: Store,
        memory: MemoryStore,
        catalog: PartnerCatalog,
        llm: LLMClient,
        settings: Callable[[], MemoryConfig],
        default_model: str,
        is_owner: Callable[[str], bool],
        notify_owner: Notify,
        timezone: Callable[[Partner | None], ZoneInfo],
        usage_day: Callable[[float], str],
        claims: ReviewClaims,
        on_reminders: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """``timezone`` names a partner's calendar (journals); ``usage_day`` the day a
        moment's tokens are booked on (the owner's, like every other kind of usage);
        ``claims`` where each review is claimed before it runs."""
        self.store = store
        self.claims = claims
        self.memory = memory
        self.catalog = catalog
        self.llm = llm
        self.settings = settings
        self.default_model = default_model
        self.is_owner = is_owner
        self.notify_owner = notify_owner
        self.timezone = timezone
        self.usage_day = usage_day
        self.clock: Callable[[], float] = time.time
        self.on_reminders = on_reminders
        """Called after a review stored new dated reminders (the scheduler plans them)."""
        self.timeout_seconds = REVIEW_TIMEOUT_SECONDS
        self._noticed: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: set[asyncio.Task[None]] = set()
        """The claimed reviews :meth:`sweep` started, running now."""

    # ---- triggers ----------------------------------------------------------------------

    async def after_turn(self, session: SessionRow, history_chars: int) -> None:
        """Turn end: ask for a review once enough new conversation piled up."""
        settings = self.settings()
        if not settings.auto_memory:
            return
        rows = await self.store.session_messages(session.id, after_id=session.reviewed_upto)
        human_turns = sum(1 for r in rows if r.role == "user")
        chars = sum(len(r.text) for r in rows)
        leaving_window = chars >= history_chars * 0.8
        if human_turns >= settings.review_turns or chars >= settings.review_chars or leaving_window:
            await self.request(session.id, DEBOUNCE_SECONDS)

    async def request(self, session_id: str, delay: float = 0.0) -> None:
        """Mark a review due (persisted, so a restart or another worker still runs it) and
        try to run it here once ``delay`` is over."""
        await self.store.mark_review_due(session_id, self.clock() + delay)
        self._spawn(self._run_later(delay), self._tasks)

    async def _run_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.run_due()

    def _spawn(self, coroutine: Awaitable[None], tasks: set[asyncio.Task[None]]) -> None:
        task = asyncio.ensure_future(coroutine)
        for kept in (self._tasks, tasks):
            kept.add(task)
            task.add_done_callback(kept.discard)

    async def run_due(self) -> int:
        """Run here every due review no other worker runs; how many were due."""
        now = self.clock()
        due = await self.store.due_reviews(now)
        await self.review_each(due, due_by=now)
        return len(due)

    async def sweep(self) -> int:
        """Claim due reviews that no worker runs, as many as this worker has room for, and
        start them (each worker's heartbeat calls this); how many were claimed."""
        room = REVIEWS_AT_ONCE - len(self._running)
        if room <= 0 or not self.settings().auto_memory:
            return 0
        now = self.clock()
        claims = await self.claims.claim_due_reviews(now, room)
        for claim in claims:
            self._spawn(self._run_claimed(claim, now), self._running)
        return len(claims)

    async def _run_claimed(self, claim: Lease, due_by: float) -> None:
        session_id = reviewed_session(claim)
        try:
            await self.review(session_id, due_by, claim=claim)
        except Exception:  # one review is an outer edge: the claim lapses, another runs it
            logger.exception("review of %s failed and could not be recorded", session_id)

    async def enqueue_idle(self) -> int:
        """Mark the sessions idle for ``idle_review_minutes`` due (the leader's sweep); any
        worker's heartbeat then claims and runs them."""
        settings = self.settings()
        if not settings.auto_memory:
            return 0
        idle_before = self.clock() - settings.idle_review_minutes * 60
        return await self.enqueue(await self.store.sessions_to_review(idle_before=idle_before))

    async def enqueue(self, sessions: list[SessionRow]) -> int:
        """Mark these sessions' reviews due now (the nightly pass); how many."""
        now = self.clock()
        for session in sessions:
            await self.store.mark_review_due(session.id, now)
        return len(sessions)

    async def review_each(self, sessions: list[SessionRow], due_by: float | None = None) -> None:
        """Review sessions one after another. :meth:`review` counts its own failures; one
        that cannot even be counted (the database refuses writes) is logged, and the other
        sessions still get their review."""
        for session in sessions:
            try:
                await self.review(session.id, due_by)
            except Exception:
                logger.exception("review of %s failed and could not be recorded", session.id)

    async def idle(self) -> None:
        """Wait until no review started here runs (tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- one review --------------------------------------------------------------------

    async def review(
        self, session_id: str, due_by: float | None = None, *, claim: Lease | None = None
    ) -> ReviewResult:
        """Review what is new in one session; failures are counted, never raised (only a
        failure to record one escapes). The review is claimed first (or runs under
        ``claim``, taken by :meth:`sweep`) and given back after: while another review of the
        session runs, this one does not. With ``due_by``, only if the review is still due by
        then: two triggers that listed the same due session review it once, and a failure
        counts once."""
        if claim is None:
            claim = await self.claims.claim_review(session_id)
            if claim is None:
                return ReviewResult(note="another review of this session is running")
        try:
            return await self._review_claimed(session_id, due_by, claim)
        except LeaseLost as exc:
            logger.warning("review of %s stopped: %s", session_id, exc)
            return ReviewResult(note="another worker took this review over")
        finally:
            await self.claims.release_review(claim)

    async def _review_claimed(
        self, session_id: str, due_by: float | None, claim: Lease
    ) -> ReviewResult:
        session = await self.store.session(session_id)
        if session is None or session.partner_id is None:
            return ReviewResult(note="no such partner session")
        if due_by is not None and not still_due(session, due_by):
            return ReviewResult(note="not due any more")
        # a partner made on another worker a moment ago is looked up, not skipped
        partner = await self.catalog.find(session.partner_id)
        rows = await self.store.reviewable_messages(session.id, session.reviewed_upto)
        if partner is None or not rows:
            await self.store.review_succeeded(session.id, session.reviewed_upto, claim)
            return ReviewResult(note="nothing new")
        upto = rows[-1].id
        human = sum(len(r.text) for r in rows if r.role == "user")
        if human < MIN_HUMAN_CHARS:
            logger.info("review of %s skipped: too short", session.id)
            await self.store.review_succeeded(session.id, upto, claim)
            return ReviewResult(note="too short")
        try:
            async with asyncio.timeout(self.timeout_seconds):
                result = await self._review(partner, session, rows, claim)
        except LeaseLost:
            raise
        except (LLMError, ReviewOutputError, TimeoutError) as exc:
            await self._failed(partner, session, upto, exc, claim)
            return ReviewResult(note=f"failed: {exc}")
        except Exception as exc:
            # a full disk, text a writer refuses, a bug: still this review's failure alone,
            # counted like the others so it is skipped after 3 and never stalls the sweep
            logger.exception("review of %s raised", session.id)
            await self._failed(partner, session, upto, exc, claim)
            return ReviewResult(note=f"failed: {exc}")
        await self.store.review_succeeded(session.id, upto, claim)
        logger.info(
            "review of %s done up to message %d: %s, %d memory change(s)",
            session.id,
            upto,
            "journal written" if result.journal else "no journal",
            len(result.changes),
        )
        return result

    async def _failed(
        self, partner: Partner, session: SessionRow, upto: int, exc: BaseException, claim: Lease
    ) -> None:
        reason = storable(str(exc) or type(exc).__name__)[:MAX_REASON_CHARS]
        retry_at = self.clock() + RETRY_SECONDS
        attempts = await self.store.review_failed(session.id, reason, retry_at, claim)
        logger.warning("review of %s failed (attempt %d): %s", session.id, attempts, reason)
        if attempts < MAX_ATTEMPTS:
            return
        await self.store.review_succeeded(session.id, upto, claim)
        await self.store.audit(
            "review", "review_skipped", session=session.id, partner=partner.id, error=reason
        )
        last = self._noticed.get(session.id, 0.0)
        if time.monotonic() - last >= OWNER_NOTICE_EVERY_SECONDS or last == 0.0:
            self._noticed[session.id] = time.monotonic()
            platform = session.chat_key.split(":", 1)[0]
            await self.notify_owner(
                platform,
                f"Memory review failed {attempts} times for {partner.name} (session "
                f"“{literal_line(session.title or session.id)}”): {literal_line(reason)}. "
                "That part of the conversation "
                "was skipped; the messages are kept.",
            )

    async def _review(
        self, partner: Partner, session: SessionRow, rows: list[MessageRow], claim: Lease
    ) -> ReviewResult:
        settings = self.settings()
        moment = self.clock()
        now = datetime.fromtimestamp(moment, self.timezone(partner))
        day = now.date().isoformat()
        files = writable_files(partner, session, self.is_owner)
        chat = await self.store.chat(session.chat_key)
        title = (chat.title if chat and chat.title else None) or session.title or "chat"
        heard = await heard_segment(self.store, chat, rows, session.reviewed_upto)
        prompt = await review_prompt(
            self.memory,
            partner,
            session,
            heard or rows,
            files,
            day=day,
            title=title,
            settings=settings,
            timezone=self.timezone(partner),
            scene=heard is not None,
        )
        model = settings.review_model or partner.preset.model or self.default_model
        answer = await ask_for_json(
            self.llm, self.store, partner.id, model, prompt, self.usage_day(moment)
        )
        journal, ops = parse_review(answer)
        # a worker paused through the model's answer writes nothing once another took over
        await self.claims.keep_review(claim)
        result = ReviewResult()
        if session.user_key is not None and files:
            result.reminders = await self._store_reminders(partner, session.user_key, answer, day)
        upto = rows[-1].id
        applied = await apply_edits(self.memory, self.store, partner, session, ops, files, upto)
        result.changes.extend(applied.changes)
        result.skipped.extend(applied.skipped)
        if journal is not None:
            await write_journal(
                self.memory, self.store, partner, session, journal, now=now, title=title, upto=upto
            )
            result.journal = True
        return result

    async def _store_reminders(
        self, partner: Partner, user_key: str, answer: dict[str, Any], day: str
    ) -> list[str]:
        """Store the answer's dated reminders for the user (and have them planned); the
        dates of those that were new."""
        stored = []
        for due, about in parse_reminders(answer, day):
            if await self.store.add_reminder(partner.id, user_key, due, about):
                stored.append(due)
        if stored and self.on_reminders is not None:
            await self.on_reminders()
        return stored
