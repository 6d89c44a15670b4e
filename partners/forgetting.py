"""Forgetting as a recorded operation (docs/architecture.md "Decisions": "Forgetting is forgetting"
and
"Forgetting is an operation, not a loop").

``/forget`` first stores its intent: whose, which partner, what kind (one ``entry``, ``all`` the
user's memory, or their ``history``), the tombstone hashes and the answer's counts, all computed
before anything is removed. Then steps run that may each run again without harm, and the
operation is marked done. A crash anywhere leaves an unfinished operation that the next start
finishes; a command delivered again finds its operation and answers with its counts.

The steps reach every copy the gateway keeps: the per-user file; the journals (files, their
search rows, and the day line of each day touched); changelog records of every kind; the
frozen prompts and the titles of sessions; reminders; the user's messages (``history``); and
the search index, merged so deleted terms leave its segments, with the WAL checkpointed so no
older page image keeps them. The texts the steps search for are the only text the operation
keeps, and only until the steps ran.

What stays is a tombstone per forgotten text: a hash
(:func:`partners.memory_format.text_hash`) kept under the partner and a key — the user's key for
what a user forgot (each entry of ``entry`` and ``all``, each message of ``history``),
``file:<name>`` for an entry the owner forgot from one of a partner's files with ``/admin
forget`` (partner "" for the owner's own memory). Every path that writes memory or messages from
outside a live conversation checks them, so nothing forgotten comes back: the review
(:mod:`partners.review_edits`), memory files read into the database
(:meth:`partners.tombstones.Tombstones.strip`: at start-up, and by ``companion database copy``)
and imported histories (:func:`partners.tombstones.unforgotten`). A hash matches a whole entry
or a whole message, the way :func:`partners.entry_text.comparable` compares them, never a
passage inside a longer text: journal passages are kept out by never reading a file over a
document the database has (see :mod:`bot.gateway.memory_documents`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from bot.store import ForgetOperation, Store
from partners.catalog import PartnerCatalog
from partners.entry_text import comparable, quotes
from partners.journal import count_forgotten_in_journals, forget_in_journals
from partners.memory import MemoryStore
from partners.memory_errors import MemoryInputError
from partners.memory_format import text_hash
from partners.persona import Partner
from partners.tools import user_memory_file

logger = logging.getLogger(__name__)

ENTRY, ALL, HISTORY = "entry", "all", "history"
JOURNALS = "memory/"
MESSAGE_ROLES = ("user", "assistant", "notice", "context", "journal", "reaction")
KEPT_AUDIO = "audio"
"""Where ``speech.keep_audio`` keeps voice notes in a partner's directory (bot/turn/media.py)."""
"""What ``/forget history`` removes: the conversation, and the journal rows search finds."""


def step_source(operation: ForgetOperation) -> str:
    """The changelog source of this operation's own records (they hold no text)."""
    return f"forget #{operation.id}"


Step = Callable[[ForgetOperation, Partner | None], Awaitable[None]]


class ForgetInterrupted(Exception):
    """A step failed (a disk error, a file no longer readable): the operation stays recorded
    and is finished at the next start or the user's next ``/forget``."""

    def __init__(self, operation: ForgetOperation, cause: Exception) -> None:
        super().__init__(f"forget operation {operation.id} interrupted: {cause}")
        self.operation = operation


class Forgetting:
    """Plans, records, runs and resumes forget operations."""

    def __init__(self, store: Store, memory: MemoryStore, catalog: PartnerCatalog) -> None:
        self.store = store
        self.memory = memory
        self.catalog = catalog
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.steps: dict[str, Step] = {
            "memory file": self._memory_file,
            "journals": self._journals,
            "changelog": self._changelog,
            "journal rows": self._journal_rows,
            "reminders": self._reminders,
            "sessions": self._sessions,
            "messages": self._messages,
        }

    def step_names(self, kind: str) -> list[str]:
        """The steps an operation of this kind runs, in order."""
        if kind == HISTORY:
            return ["reminders", "sessions", "messages"]
        return ["memory file", "journals", "changelog", "journal rows", "reminders", "sessions"]

    async def forget(
        self,
        partner: Partner,
        user_key: str,
        kind: str,
        *,
        entry_id: str | None = None,
        request: str | None = None,
    ) -> ForgetOperation | None:
        """Forget, and return the finished operation; None if the user has no such entry.

        A ``request`` (the command's platform message) seen before gets its own operation
        back, finished if a crash had cut it off. Raises UnreadableFile before anything is
        recorded if a file to rewrite cannot be read, and ForgetInterrupted if a step
        failed: the operation then stays recorded and is finished later."""
        async with self._locks.setdefault((partner.id, user_key), asyncio.Lock()):
            if request is not None and (known := await self.store.forget_operation(request)):
                return await self.finish(known)
            for left in await self.store.unfinished_forgets(partner.id, user_key):
                await self.finish(left)
            planned = await self.plan(partner, user_key, kind, entry_id=entry_id, request=request)
            if planned is None:
                return None
            return await self.finish(await self.store.begin_forget(planned))

    async def finish_unfinished(self) -> int:
        """Finish what a crash or a failed step left (at start-up); returns how many."""
        finished = 0
        for operation in await self.store.unfinished_forgets():
            try:
                await self.finish(operation)
            except ForgetInterrupted as exc:
                logger.error("%s; it stays recorded", exc)
                continue
            finished += 1
        return finished

    # ---- the intent ----------------------------------------------------------------------

    async def plan(
        self,
        partner: Partner,
        user_key: str,
        kind: str,
        *,
        entry_id: str | None = None,
        request: str | None = None,
    ) -> ForgetOperation | None:
        """What the operation will remove and the counts to answer with, read before anything
        is removed (strictly: a file that cannot be rewritten fails here, not halfway)."""
        if kind not in (ENTRY, ALL, HISTORY):
            raise ValueError(f"unknown kind of forgetting {kind!r}")
        operation = ForgetOperation(partner.id, user_key, kind, request)
        if kind == HISTORY:
            return await self._plan_history(operation)
        entries = await self.memory.entries(user_memory_file(partner, user_key), strict=True)
        if kind == ENTRY:
            entries = [e for e in entries if e.id == entry_id]
            if not entries:
                return None
        texts = sorted({e.text for e in entries})
        operation = replace(
            operation,
            entry_ids=tuple(e.id for e in entries if e.id),
            hashes=tuple(sorted({text_hash(t) for t in texts})),
            texts=tuple(texts),
            entries=len(entries),
        )
        passages = await count_forgotten_in_journals(
            self.memory,
            partner.dir,
            texts=set(texts),
            user_key=user_key,
            whole_entries=kind == ALL,
        )
        rows = await self._journal_row_ids(operation)
        return replace(operation, passages=max(passages, len(rows)))

    async def _plan_history(self, operation: ForgetOperation) -> ForgetOperation:
        """``history``: the messages to remove, the sessions they titled, and a tombstone of
        each message's text, so that a history imported later does not bring it back (see
        :func:`partners.tombstones.unforgotten`)."""
        partner_id, user_key = operation.partner_id, operation.user_key
        said = [
            row
            for row in await self.store.user_messages(partner_id, user_key)
            if row.role in MESSAGE_ROLES and row.status != "pending"
        ]
        titled = await self.store.sessions_titled_by(partner_id, user_key)
        hashes = tuple(sorted({text_hash(row.text) for row in said if row.text.strip()}))
        return replace(operation, session_ids=tuple(titled), messages=len(said), hashes=hashes)

    # ---- the steps -------------------------------------------------------------------------

    async def finish(self, operation: ForgetOperation) -> ForgetOperation:
        """Run every step that is left; each may run again after a crash without harm."""
        if operation.status == "done":
            return operation
        if operation.status == "running":
            partner = await self.catalog.find(operation.partner_id)
            try:
                for name in self.step_names(operation.kind):
                    await self.run_step(operation, name, partner)
            except (OSError, MemoryInputError) as exc:
                raise ForgetInterrupted(operation, exc) from exc
            await self.store.forget_scrubbed(operation.id)
        if not await self.store.erase_deleted_text():
            # a reader (a backup beside the gateway) held the WAL: the next start retries
            logger.warning("forget operation %d: the WAL could not be truncated yet", operation.id)
            return replace(operation, status="scrubbed", texts=())
        await self.store.forget_done(operation.id)
        return replace(operation, status="done", texts=())

    async def run_step(
        self, operation: ForgetOperation, name: str, partner: Partner | None = None
    ) -> None:
        """One named step (see :meth:`step_names`)."""
        await self.steps[name](operation, partner or await self.catalog.find(operation.partner_id))

    async def _memory_file(self, operation: ForgetOperation, partner: Partner | None) -> None:
        if partner is None:
            return
        file = user_memory_file(partner, operation.user_key)
        source = step_source(operation)
        if operation.kind == ALL:
            await self.memory.clear_file(file, source=source)
            return
        present = {e.id for e in await self.memory.entries(file)}
        for entry_id in operation.entry_ids:
            if entry_id in present:
                await self.memory.forget_entry(file, entry_id, source=source)

    async def _journals(self, operation: ForgetOperation, partner: Partner | None) -> None:
        if partner is None:
            return
        await forget_in_journals(
            self.memory,
            partner.dir,
            texts=set(operation.texts),
            user_key=operation.user_key,
            whole_entries=operation.kind == ALL,
            source=step_source(operation),
        )

    async def _changelog(self, operation: ForgetOperation, partner: Partner | None) -> None:
        """Records of the user's file (by entry, by text, or all of them), and those of the
        journal blocks and day lines this operation removed or changed (found by its own
        text-less records, so a resumed operation finds them too)."""
        if partner is None:
            return
        touched = {
            change.file
            for change in await self.memory.changes(partner.dir)
            if change.source == step_source(operation) and change.file.startswith(JOURNALS)
        }
        own_file = user_memory_file(partner, operation.user_key).name
        await self.memory.scrub_changelog(
            partner.dir,
            own_file,
            entry_ids=set(operation.entry_ids),
            texts=set(operation.texts),
            whole_file=operation.kind == ALL,
            gone_from=touched,
            # journals by what left them (another user's passage quoting the same words is
            # theirs, and stays with its record), other files are not the user's
            quotes_in={own_file},
        )

    async def _journal_rows(self, operation: ForgetOperation, partner: Partner | None) -> None:
        del partner  # the rows are the store's
        await self.store.delete_messages(await self._journal_row_ids(operation))

    async def _journal_row_ids(self, operation: ForgetOperation) -> list[int]:
        """Journal rows search finds: with ``all`` every row from the user's own
        conversations; rows quoting a forgotten text, unless another user's or the owner's
        conversation wrote them (as in the journal files, those stay theirs)."""
        needles = [comparable(t) for t in operation.texts]
        own = f"user:{operation.user_key}"
        return [
            row.id
            for row in await self.store.journal_messages(operation.partner_id)
            if (row.audience == own and operation.kind == ALL)
            or (quotes(row.text, needles) and (row.audience == own or _is_group(row.audience)))
        ]

    async def _reminders(self, operation: ForgetOperation, partner: Partner | None) -> None:
        """A reminder is what the review took from the conversation: with ``entry`` those
        quoting the text (or quoted by it) go, otherwise all of the user's."""
        del partner
        needles = [comparable(t) for t in operation.texts]
        doomed = [
            row["id"]
            for row in await self.store.user_reminders(operation.partner_id, operation.user_key)
            if operation.kind != ENTRY
            or quotes(row["about"], needles)
            or any(comparable(row["about"]) in needle for needle in needles)
        ]
        await self.store.delete_reminders(doomed)

    async def _sessions(self, operation: ForgetOperation, partner: Partner | None) -> None:
        """Frozen prompts hold the memory as it was; titles are first messages."""
        del partner
        await self.store.forget_session_prompts(operation.partner_id, operation.user_key)
        await self.store.clear_session_titles(operation.session_ids)

    async def _messages(self, operation: ForgetOperation, partner: Partner | None) -> None:
        """The messages (their transcripts and, by the store's trigger, their media references)
        — the kept audio first, so a crash in between leaves nothing to find it by."""
        ids = await self.store.user_message_ids(
            operation.partner_id, operation.user_key, MESSAGE_ROLES
        )
        if partner is not None:
            await asyncio.to_thread(forget_kept_audio, partner.dir / KEPT_AUDIO, ids)
        await self.store.delete_messages(ids)


def forget_kept_audio(folder: Path, message_ids: list[int]) -> None:
    """Remove the voice notes ``speech.keep_audio`` kept for these messages."""
    if not folder.is_dir():
        return
    wanted = {str(i) for i in message_ids}
    for path in folder.iterdir():
        if path.stem in wanted:
            path.unlink(missing_ok=True)


def _is_group(audience: str) -> bool:
    """A group's history (``chat:…``), as opposed to someone's DMs (``user:…``, ``owner``)."""
    return audience.startswith("chat:")
