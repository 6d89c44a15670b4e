"""The nightly pass over one partner: enqueue pending reviews, tidy memory, summarise the day.

Pending reviews are only marked due: any worker's heartbeat claims and runs them
(:mod:`partners.review`), so the leader that runs this pass never reviews because it leads.

Consolidation reads MEMORY.md and each per-user file with two or more entries and asks for
merges of duplicates and removal of entries contradicted by newer ones, by entry id, under the
same guard rails as a review (no whole-file rewrite; a batch removing or editing more than a
quarter of a file of 8+ entries is refused). Then yesterday's journal gets a one-line summary
at its top.
A partner is consolidated at most once per day: the day is recorded in the store, so a restart
or a late, coalesced run never does it twice. Each file, the day line and each partner are
separate pieces of work: one that fails (a broken answer, a full disk) is logged and the pass
goes on with the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from importlib import resources
from typing import Any
from zoneinfo import ZoneInfo

from bot.config.memory import MemoryConfig
from bot.services.llm import LLMClient, LLMError
from bot.store import Store
from partners.catalog import PartnerCatalog
from partners.journal import DAY_LINE, clip, journal_file
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import MemoryInputError
from partners.persona import Partner
from partners.review import Reviewer
from partners.review_answer import ReviewOutputError, ask_for_json
from partners.review_edits import removes_too_much

logger = logging.getLogger(__name__)

DONE_KEY = "nightly:{partner}"


@dataclass
class NightlyResult:
    partner: str
    skipped: bool = False
    reviews: int = 0
    changes: list[str] = field(default_factory=list)
    day_line: str | None = None
    failed: list[str] = field(default_factory=list)
    """What could not be done this night (file names, "day line"), each logged with why."""


EXPECTED_FAILURES = (LLMError, ReviewOutputError)


def prompt(name: str) -> str:
    return (resources.files("partners") / "prompts" / name).read_text("utf-8")


class Consolidator:
    def __init__(
        self,
        *,
        store: Store,
        memory: MemoryStore,
        catalog: PartnerCatalog,
        llm: LLMClient,
        reviewer: Reviewer,
        settings: Callable[[], MemoryConfig],
        default_model: str,
        timezone: Callable[[Partner | None], ZoneInfo],
        usage_day: Callable[[float], str],
    ) -> None:
        """``timezone`` names a partner's calendar (its day, its journals); ``usage_day`` the
        day a moment's tokens are booked on (the owner's, like every other kind of usage)."""
        self.store = store
        self.memory = memory
        self.catalog = catalog
        self.llm = llm
        self.reviewer = reviewer
        self.settings = settings
        self.default_model = default_model
        self.timezone = timezone
        self.usage_day = usage_day

    async def run_all(self) -> list[NightlyResult]:
        results = []
        for partner in self.catalog.all():
            try:
                results.append(await self.nightly(partner))
            except Exception:
                logger.exception("nightly pass for %s failed", partner.id)
        return results

    async def nightly(self, partner: Partner, now: datetime | None = None) -> NightlyResult:
        now = now or datetime.now(self.timezone(partner))
        today = now.date().isoformat()
        key = DONE_KEY.format(partner=partner.id)
        if (await self.store.settings()).get(key) == today:
            return NightlyResult(partner.id, skipped=True)
        result = NightlyResult(partner.id)
        booked_on = self.usage_day(now.timestamp())
        pending = await self.store.sessions_to_review(partner_id=partner.id)
        result.reviews = await self.reviewer.enqueue(pending)  # any worker runs them
        for file in await self._files(partner):
            try:
                result.changes += await self._consolidate(partner, file, booked_on)
            except Exception as exc:
                _log_failure(f"consolidation of {partner.id}/{file.name}", exc)
                result.failed.append(file.name)
        try:
            yesterday = (now - timedelta(days=1)).date()
            result.day_line = await self._day_line(partner, yesterday, booked_on)
        except Exception as exc:
            _log_failure(f"day line of {partner.id}", exc)
            result.failed.append("day line")
        await self.store.put_setting(key, today)
        return result

    async def _files(self, partner: Partner) -> list[MemoryFile]:
        users = await self.memory.documents.names(partner.dir, "users")
        per_user = [MemoryFile(partner.dir, name) for name in users if name.endswith(".md")]
        return [MemoryFile(partner.dir, "MEMORY.md"), *per_user]

    async def _complete(self, partner: Partner, text: str, booked_on: str) -> dict[str, Any]:
        model = self.settings().review_model or partner.preset.model or self.default_model
        return await ask_for_json(self.llm, self.store, partner.id, model, text, booked_on)

    async def _consolidate(self, partner: Partner, file: MemoryFile, booked_on: str) -> list[str]:
        entries = [e for e in await self.memory.entries(file) if e.id]
        if len(entries) < 2:
            return []
        listing = "\n".join(f"{e.id}: {e.text}" for e in entries)
        text = prompt("consolidate.md").replace("{{partner}}", partner.name)
        text = text.replace("{{file}}", file.name).replace("{{entries}}", listing)
        ops = _json_ops(await self._complete(partner, text, booked_on))
        removing = sum(1 for op in ops if op.get("op") in ("remove", "edit"))
        if removes_too_much(len(entries), removing):
            logger.warning(
                "consolidation of %s/%s rejected: too many removals", partner.id, file.name
            )
            return []
        known = {e.id for e in entries}
        changes = []
        for op in ops:
            entry_id = str(op.get("id", ""))
            if entry_id not in known:
                continue
            try:
                if op.get("op") == "remove":
                    result = await self.memory.remove(
                        file, entry_id, reason="consolidation", source="nightly"
                    )
                elif op.get("op") == "edit" and op.get("text"):
                    result = await self.memory.edit(
                        file, entry_id, str(op["text"]), reason="consolidation", source="nightly"
                    )
                else:
                    continue
            except MemoryInputError as exc:
                logger.info("consolidation op skipped: %s", exc)
                continue
            if result.change_id:
                changes.append(result.change_id)
        return changes

    async def _day_line(self, partner: Partner, day: date, booked_on: str) -> str | None:
        file = journal_file(partner, day.isoformat())
        journal = await self.memory.read(file)
        if not journal.strip() or DAY_LINE in journal:
            return None
        text = prompt("day_summary.md").replace("{{journal}}", journal[-12000:])
        data = await self._complete(partner, text, booked_on)
        line = clip(str(data.get("summary") or ""))
        if not line:
            return None
        await self.memory.insert_after_header(
            file, DAY_LINE + line, reason="day summary", source="nightly"
        )
        return line


def _log_failure(what: str, exc: Exception) -> None:
    """A provider error or a broken answer is routine (a warning); anything else is a bug or
    a full disk and gets its traceback."""
    if isinstance(exc, EXPECTED_FAILURES):
        logger.warning("%s failed: %s", what, exc)
    else:
        logger.exception("%s failed", what)


def _json_ops(data: dict[str, Any]) -> list[dict[str, Any]]:
    ops = data.get("ops") or []
    return [op for op in ops if isinstance(op, dict)] if isinstance(ops, list) else []
