"""Review: one LLM call turns a new part of a conversation into a journal entry and memory edits.

Triggers (DESIGN.md "Review, consolidation and journals"): the end of a turn once enough new
human turns or characters piled up (debounced 5 s), before turns would leave the history
window, an idle session, ``/new``, and the nightly job. The watermark (last reviewed message)
advances only after a review succeeded; after 3 failed attempts it is forced forward, an audit
row is written and the owner is told (at most once per session per 10 minutes).

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

What a review may write depends on whose conversation it was (DESIGN.md "Decisions": per-user
writes): in ``per_user`` scope a user's conversation changes only that user's file and the
partner's own files change only from the owner's conversations; group conversations of a
per-user partner write the journal only. SYSTEM.md, AGENTS.md and the owner's memory are never
reachable. Edits quote text that must appear exactly once; a batch that would remove or replace
more than a quarter of a file's entries (files of 8 entries or more) is refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from bot.config import MemoryConfig
from bot.literal import literal_line
from bot.llm import LLMClient, LLMError, storable
from bot.store import Lease, LeaseLost, MessageRow, NewMessage, SessionRow, Store, reviewed_session
from partners.catalog import PartnerCatalog
from partners.journal import (
    JournalEntry,
    day_header,
    journal_file,
    render,
    summaries_for_chat,
    user_marker,
)
from partners.memory import (
    MemoryFile,
    MemoryInputError,
    MemoryStore,
    strip_ids,
    text_hash,
)
from partners.persona import MEMORY_FILES, Partner
from partners.tools import user_memory_file

logger = logging.getLogger(__name__)

REVIEW_TIMEOUT_SECONDS = 120.0
DEBOUNCE_SECONDS = 5.0
MAX_ATTEMPTS = 3
RETRY_SECONDS = 60.0
OWNER_NOTICE_EVERY_SECONDS = 600.0
MIN_HUMAN_CHARS = 20
REMOVAL_GUARD_ENTRIES = 8
REMOVAL_GUARD_SHARE = 0.25
MAX_ANSWER_DEPTH = 8
"""An answer nests 4 levels at most (answer, memory list, operation, value); deeper is broken."""
MAX_REASON_CHARS = 300
REVIEWS_AT_ONCE = 2
"""How many claimed reviews one worker runs at once (beside its turns: a review is one
model call, and a worker's sweep leaves the rest to the other workers)."""
CUT_MARKER = "… (earlier part omitted)"
MESSAGE_SHARE = 5
"""One message shows at most this share of the review's window (1/5): a reply longer than
the window (a story in three chunks) would otherwise push every turn before it out, and the
watermark passes those turns whether the model saw them or not."""
CLIPPED_MARKER = " … (shortened)"
USER_FILE = "USER_FILE"


class ReviewOutputError(ValueError):
    """The model's answer was not the JSON a review needs."""


@dataclass
class ReviewResult:
    journal: bool = False
    changes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    reminders: list[str] = field(default_factory=list)
    note: str = ""


def removes_too_much(entries: int, removing: int) -> bool:
    """The removal guard (DESIGN.md "Decisions"): one review or consolidation batch may take
    away at most a quarter of the entries of a file of 8 or more. A replace takes the old text
    away as surely as a remove does, so ``removing`` counts both."""
    return entries >= REMOVAL_GUARD_ENTRIES and removing > entries * REMOVAL_GUARD_SHARE


def review_prompt_template() -> str:
    return (resources.files("partners") / "prompts" / "review.md").read_text("utf-8")


def json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer, read defensively: code fences or prose around it."""
    if not text.strip():
        raise ReviewOutputError("empty answer")
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ReviewOutputError("no JSON object in the answer")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ReviewOutputError(f"invalid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise ReviewOutputError("the JSON is nested too deeply") from exc
    if not isinstance(data, dict):
        raise ReviewOutputError("the answer is not a JSON object")
    return cleaned(data)


def cleaned(value: Any, depth: int = 0) -> Any:
    """``value`` with every text storable: a ``\\ud83d`` escape decodes to a lone surrogate,
    which no file or database can hold, so it becomes U+FFFD before anything is written.
    Nesting deeper than an answer needs is refused here rather than breaking a writer later."""
    if depth > MAX_ANSWER_DEPTH:
        raise ReviewOutputError("the JSON is nested too deeply")
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [cleaned(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {storable(key): cleaned(item, depth + 1) for key, item in value.items()}
    return value


async def ask_for_json(
    llm: LLMClient, store: Store, partner_id: str, model: str, prompt: str, usage_day: str
) -> dict[str, Any]:
    """One JSON-mode call on behalf of memory upkeep, its tokens counted as "review" on
    ``usage_day`` (the owner's calendar, :meth:`Config.usage_day`, not the partner's)."""
    completion = await llm.complete(
        [{"role": "user", "content": prompt}], model=model, json_mode=True
    )
    await store.add_usage(
        usage_day,
        partner_id,
        "review",
        completion.model,
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
    )
    return json_object(completion.text)


def parse_review(data: dict[str, Any]) -> tuple[JournalEntry | None, list[dict[str, Any]]]:
    """The journal entry and memory operations of a review's answer; missing parts are empty."""
    journal = None
    raw = data.get("journal")
    if isinstance(raw, dict) and isinstance(raw.get("summary"), str) and raw["summary"].strip():

        def items(key: str) -> list[str]:
            value = raw.get(key) or []
            return [str(v) for v in value if str(v).strip()] if isinstance(value, list) else []

        journal = JournalEntry(
            raw["summary"], items("discussed"), items("facts"), items("feelings")
        )
    ops = data.get("memory") or []
    if not isinstance(ops, list):
        raise ReviewOutputError("'memory' must be a list of operations")
    return journal, [op for op in ops if isinstance(op, dict)]


def parse_reminders(data: dict[str, Any], today: str) -> list[tuple[str, str]]:
    """(date, about) pairs from the review's answer: future dates only, short texts."""
    raw = data.get("reminders")
    found = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        day, about = str(item.get("date", "")), " ".join(str(item.get("about", "")).split())
        try:
            valid = datetime.fromisoformat(day).date().isoformat() == day
        except ValueError:
            valid = False
        if valid and day >= today and about:
            found.append((day, about[:120]))
    return found


def segment_text(rows: list[MessageRow], window_chars: int, timezone: ZoneInfo) -> str:
    """The messages as `[HH:MM] Name: text` lines, each shortened to its start past a fifth
    of the window, keeping the tail when still over the window."""
    most = window_chars // MESSAGE_SHARE
    lines = [
        f"[{datetime.fromtimestamp(r.created_at, timezone):%H:%M}] {r.speaker or r.role}: "
        + (r.text if len(r.text) <= most else r.text[:most].rstrip() + CLIPPED_MARKER)
        for r in rows
    ]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        used += len(line) + 1
        if used > window_chars and kept:
            kept.append(CUT_MARKER)
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def still_due(session: SessionRow, by: float) -> bool:
    return session.review_due_at is not None and session.review_due_at <= by


def segment_source(session: SessionRow, upto: int) -> str:
    """The changelog ``source`` of what a review of ``session`` up to message ``upto``
    writes: the same for every run over that segment, so a re-run can tell it wrote."""
    return f"review of session {session.id} up to message {upto}"


Notify = Callable[[str, str], Awaitable[None]]


class ReviewClaims(Protocol):
    """Where reviews are claimed (:class:`bot.workers.Worker`, under its id and leases)."""

    async def claim_review(self, session_id: str) -> Lease | None:
        """Claim one session's review; None while another review of it runs."""

    async def claim_due_reviews(self, due_by: float, limit: int) -> list[Lease]:
        """Claim up to ``limit`` reviews due by ``due_by`` that no worker runs."""

    async def keep_review(self, claim: Lease) -> None:
        """Raise :class:`LeaseLost` unless the claim still holds (it is renewed)."""

    async def release_review(self, claim: Lease) -> None:
        """Give the claim back (a claim already taken over is left alone)."""


class Reviewer:
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
        self.on_reminders: Callable[[], Awaitable[object]] | None = None
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
        partner = self.catalog.get(session.partner_id)
        rows = await self.store.session_messages(session.id, after_id=session.reviewed_upto)
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

    def writable_files(self, partner: Partner, session: SessionRow) -> dict[str, MemoryFile]:
        """Which files this session's review may change (DESIGN.md "Decisions")."""
        own = {name: MemoryFile(partner.dir, name) for name in MEMORY_FILES}
        if not partner.per_user:
            return own
        if session.user_key is None:
            return {}
        if self.is_owner(session.user_key):
            return own
        return {USER_FILE: user_memory_file(partner, session.user_key)}

    async def _review(
        self, partner: Partner, session: SessionRow, rows: list[MessageRow], claim: Lease
    ) -> ReviewResult:
        settings = self.settings()
        moment = self.clock()
        now = datetime.fromtimestamp(moment, self.timezone(partner))
        day = now.date().isoformat()
        files = self.writable_files(partner, session)
        chat = await self.store.chat(session.chat_key)
        title = (chat.title if chat and chat.title else None) or session.title or "chat"
        prompt = await self._prompt(partner, session, rows, files, day, title, settings)
        model = settings.review_model or partner.preset.model or self.default_model
        answer = await ask_for_json(
            self.llm, self.store, partner.id, model, prompt, self.usage_day(moment)
        )
        journal, ops = parse_review(answer)
        # a worker paused through the model's answer writes nothing once another took over
        await self.claims.keep_review(claim)
        result = ReviewResult()
        if session.user_key is not None and files:
            for due, about in parse_reminders(answer, day):
                if await self.store.add_reminder(partner.id, session.user_key, due, about):
                    result.reminders.append(due)
            if result.reminders and self.on_reminders is not None:
                await self.on_reminders()
        await self._apply(partner, session, ops, files, result, rows[-1].id)
        if journal is not None:
            who = await self._who(partner, session)
            await self._write_journal(partner, session, journal, now, title, who, rows[-1].id)
            result.journal = True
        return result

    async def _prompt(
        self,
        partner: Partner,
        session: SessionRow,
        rows: list[MessageRow],
        files: dict[str, MemoryFile],
        day: str,
        title: str,
        settings: MemoryConfig,
    ) -> str:
        shown = []
        for label, file in files.items():
            name = file.name if label == USER_FILE else label
            body = strip_ids(await self.memory.read(file)).strip() or "(empty)"
            shown.append(f"### {name}\n{body}")
        sizes = {n: len(await self.memory.read(MemoryFile(partner.dir, n))) for n in MEMORY_FILES}
        budget = ""
        if sum(sizes.values()) > settings.context_budget:
            heavy = ", ".join(sorted(sizes, key=lambda n: sizes[n], reverse=True)[:2])
            budget = (
                f"The memory is over its budget of {settings.context_budget} characters: "
                f"condense {heavy} (merge duplicates, drop what is out of date).\n"
            )
        allowed = (
            ", ".join(f.name if label == USER_FILE else label for label, f in files.items())
            or "none (write only the journal)"
        )
        values = {
            "partner": partner.name,
            "allowed": allowed,
            "budget": budget,
            "files": "\n\n".join(shown) or "(none)",
            "journal": await summaries_for_chat(self.memory, partner, day, session.chat_key)
            or "(nothing yet)",
            "chat": title,
            "segment": segment_text(
                rows, max(settings.review_chars * 2, 4000), self.timezone(partner)
            ),
        }
        text = review_prompt_template()
        for key, value in values.items():
            text = text.replace("{{" + key + "}}", value)
        return text

    async def _apply(
        self,
        partner: Partner,
        session: SessionRow,
        ops: list[dict[str, Any]],
        files: dict[str, MemoryFile],
        result: ReviewResult,
        upto: int,
    ) -> None:
        """Apply the answer's memory edits, file by file. When an earlier run over this
        segment got as far as its journal entry (it was cut off before its watermark, or
        lost its claim after writing), it had applied all of its edits: a file holding edits
        of this segment gets none again, since the model's second answer need not repeat its
        first word for word. An earlier run cut off before its journal may have applied only
        some: every edit is applied again, an add of the same text being a duplicate the
        memory store refuses and a replace or remove finding its old text gone."""
        by_name = {(f.name if label == USER_FILE else label): f for label, f in files.items()}
        grouped: dict[str, list[dict[str, Any]]] = {}
        for op in ops:
            name = str(op.get("file", ""))
            if name not in by_name:
                result.skipped.append(f"{name or '(no file)'}: not writable here")
                logger.warning("review of %s: op on %r refused", session.id, name)
                continue
            grouped.setdefault(name, []).append(op)
        source = segment_source(session, upto)
        written = await self._files_written(partner, source)
        forgotten: set[str] = set()
        if USER_FILE in files and session.partner_id and session.user_key:
            forgotten = await self.store.tombstones(session.partner_id, session.user_key)
        for name, file_ops in grouped.items():
            file = by_name[name]
            if file.name in written:
                result.skipped.append(f"{name}: this part was reviewed into it already")
                logger.info("review of %s: %s already holds this segment", session.id, name)
                continue
            if await self._removes_too_much(file, file_ops):
                result.skipped.append(
                    f"{name}: batch would remove or replace over 25% of its entries"
                )
                logger.warning("review of %s: %s batch rejected (removal guard)", session.id, name)
                continue
            for op in file_ops:
                if forgotten and text_hash(str(op.get("text") or "")) in forgotten:
                    result.skipped.append(f"{name}: the user asked to forget this")
                    continue
                try:
                    change = await self._apply_one(file, op, source)
                except MemoryInputError as exc:
                    result.skipped.append(f"{name}: {exc}")
                    logger.info("review of %s: op skipped: %s", session.id, exc)
                    continue
                if change:
                    result.changes.append(change)

    async def _files_written(self, partner: Partner, source: str) -> set[str]:
        """The files holding a memory edit from ``source`` by a run that went on to write
        its journal entry (the last thing a review writes); none when no run got so far."""
        changes = [c for c in await self.memory.changes(partner.dir) if c.source == source]
        if not any(change.op == "append" for change in changes):
            return set()
        return {change.file for change in changes if change.op != "append"}

    async def _removes_too_much(self, file: MemoryFile, ops: list[dict[str, Any]]) -> bool:
        entries = await self.memory.entries(file)
        removing = sum(1 for op in ops if op.get("op") in ("remove", "replace"))
        return removes_too_much(len(entries), removing)

    async def _apply_one(self, file: MemoryFile, op: dict[str, Any], source: str) -> str | None:
        kind = op.get("op")
        text = str(op.get("text") or "")
        old = str(op.get("old") or "")
        reason = str(op.get("reason") or "review")
        if kind == "add":
            result = await self.memory.add(file, text, reason=reason, source=source)
        elif kind == "replace":
            if not text.strip():
                raise MemoryInputError("replace needs new text")
            result = await self.memory.replace_text(file, old, text, reason=reason, source=source)
        elif kind == "remove":
            result = await self.memory.replace_text(file, old, "", reason=reason, source=source)
        else:
            raise MemoryInputError(f"unknown op {kind!r}")
        return result.change_id

    async def _who(self, partner: Partner, session: SessionRow) -> str:
        if not partner.per_user or session.user_key is None:
            return ""
        user = await self.store.user(session.user_key)
        name = (user["display_name"] if user else "") or session.user_key
        return f"{name} {user_marker(session.user_key)}"

    async def _write_journal(
        self,
        partner: Partner,
        session: SessionRow,
        entry: JournalEntry,
        now: datetime,
        title: str,
        who: str,
        upto: int,
    ) -> None:
        """Append the entry once per reviewed segment: a review cut off between this write
        and its watermark runs again, and must not write a second entry for the same part."""
        day = now.date().isoformat()
        file = journal_file(partner, day)
        source = segment_source(session, upto)
        if not await self._journal_written(partner, file, source):
            block = render(entry, now, title, session.chat_key, who)
            await self.memory.append(
                file, block, header=day_header(day), reason="journal", source=source
            )
        await self.store.add_message(
            NewMessage(
                chat_key=session.chat_key,
                role="journal",
                text=entry.as_text(),
                audience=session.audience,
                dedup_key=f"journal:{session.id}:{upto}",
                session_id=session.id,
                partner_id=partner.id,
                speaker="journal",
            )
        )

    async def _journal_written(self, partner: Partner, file: MemoryFile, source: str) -> bool:
        """Whether a journal block from ``source`` is in the file (its changelog record comes
        first, so a record alone may be a write that never happened)."""
        for change in reversed(await self.memory.changes(partner.dir)):
            if change.op == "append" and change.file == file.name and change.source == source:
                written = (await self.memory.read(file)).replace("\r\n", "\n")
                return (change.new or "").rstrip("\n") in written
        return False
