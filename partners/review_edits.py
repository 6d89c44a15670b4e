"""What a review writes: its memory edits, behind their guards, and its journal entry.

What a review may write depends on whose conversation it was (docs/architecture.md "Decisions":
per-user writes): in ``per_user`` scope a user's conversation changes only that user's file and the
partner's own files change only from the owner's conversations; group conversations of a per-user
partner write the journal only. SYSTEM.md, AGENTS.md and the owner's memory are never reachable.
Edits quote text that must appear exactly once; a batch that would remove or replace more than a
quarter of a file's entries (files of 8 entries or more) is refused.

Everything one review writes carries its segment in the changelog ``source``
(:func:`segment_source`): a review cut off before its watermark runs again over the same
segment, and what that segment already wrote is not written twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.store import NewMessage, SessionRow, Store
from partners.journal import JournalEntry, day_header, journal_file, render, user_marker
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import MemoryInputError
from partners.memory_format import text_hash
from partners.persona import MEMORY_FILES, Partner
from partners.tombstones import file_key
from partners.tools import user_memory_file

logger = logging.getLogger(__name__)

REMOVAL_GUARD_ENTRIES = 8
REMOVAL_GUARD_SHARE = 0.25
USER_FILE = "USER_FILE"
"""The label of the user's own file among a review's writable files (its name varies)."""


@dataclass
class EditsApplied:
    """What applying one answer's memory edits did: the changes written, and why the others
    were not."""

    changes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def removes_too_much(entries: int, removing: int) -> bool:
    """The removal guard (docs/architecture.md "Decisions"): one review or consolidation batch may
    take
    away at most a quarter of the entries of a file of 8 or more. A replace takes the old text
    away as surely as a remove does, so ``removing`` counts both."""
    return entries >= REMOVAL_GUARD_ENTRIES and removing > entries * REMOVAL_GUARD_SHARE


def segment_source(session: SessionRow, upto: int) -> str:
    """The changelog ``source`` of what a review of ``session`` up to message ``upto``
    writes: the same for every run over that segment, so a re-run can tell it wrote."""
    return f"review of session {session.id} up to message {upto}"


def writable_files(
    partner: Partner, session: SessionRow, is_owner: Callable[[str], bool]
) -> dict[str, MemoryFile]:
    """Which files this session's review may change (docs/architecture.md "Decisions"), by the name
    the model sees, the user's own file under :data:`USER_FILE`."""
    own = {name: MemoryFile(partner.dir, name) for name in MEMORY_FILES}
    if not partner.per_user:
        return own
    if session.user_key is None:
        return {}
    if is_owner(session.user_key):
        return own
    return {USER_FILE: user_memory_file(partner, session.user_key)}


def shown_name(label: str, file: MemoryFile) -> str:
    """The name the model sees and writes for one of the writable files."""
    return file.name if label == USER_FILE else label


async def apply_edits(
    memory: MemoryStore,
    store: Store,
    partner: Partner,
    session: SessionRow,
    ops: list[dict[str, Any]],
    files: dict[str, MemoryFile],
    upto: int,
) -> EditsApplied:
    """Apply the answer's memory edits, file by file. When an earlier run over this
    segment got as far as its journal entry (it was cut off before its watermark, or
    lost its claim after writing), it had applied all of its edits: a file holding edits
    of this segment gets none again, since the model's second answer need not repeat its
    first word for word. An earlier run cut off before its journal may have applied only
    some: every edit is applied again, an add of the same text being a duplicate the
    memory store refuses and a replace or remove finding its old text gone."""
    applied = EditsApplied()
    by_name = {shown_name(label, f): f for label, f in files.items()}
    grouped = _grouped_by_file(ops, by_name, session, applied)
    source = segment_source(session, upto)
    written = await _files_written(memory, partner, source)
    forgotten = await _forgotten(store, partner, session, files)
    for name, file_ops in grouped.items():
        file = by_name[name]
        if file.name in written:
            applied.skipped.append(f"{name}: this part was reviewed into it already")
            logger.info("review of %s: %s already holds this segment", session.id, name)
            continue
        if await _removes_too_much(memory, file, file_ops):
            applied.skipped.append(f"{name}: batch would remove or replace over 25% of its entries")
            logger.warning("review of %s: %s batch rejected (removal guard)", session.id, name)
            continue
        for op in file_ops:
            if text_hash(str(op.get("text") or "")) in forgotten.get(name, set()):
                applied.skipped.append(f"{name}: left out, someone asked to forget it")
                continue
            try:
                change = await _apply_one(memory, file, op, source)
            except MemoryInputError as exc:
                applied.skipped.append(f"{name}: {exc}")
                logger.info("review of %s: op skipped: %s", session.id, exc)
                continue
            if change:
                applied.changes.append(change)
    return applied


async def _forgotten(
    store: Store, partner: Partner, session: SessionRow, files: dict[str, MemoryFile]
) -> dict[str, set[str]]:
    """The tombstones each writable file's edits are checked against, by shown name: what
    the owner forgot from that file (``/admin forget``) and, in the user's own file, what the
    user forgot (see :mod:`partners.forgetting`)."""
    forgotten = {}
    for label, file in files.items():
        hashes = await store.tombstones(partner.id, file_key(file.name))
        if label == USER_FILE and session.user_key:
            hashes |= await store.tombstones(partner.id, session.user_key)
        forgotten[shown_name(label, file)] = hashes
    return forgotten


def _grouped_by_file(
    ops: list[dict[str, Any]],
    by_name: dict[str, MemoryFile],
    session: SessionRow,
    applied: EditsApplied,
) -> dict[str, list[dict[str, Any]]]:
    """The operations on each writable file, in their order; one on any other file is
    refused and noted in ``applied``."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for op in ops:
        name = str(op.get("file", ""))
        if name not in by_name:
            applied.skipped.append(f"{name or '(no file)'}: not writable here")
            logger.warning("review of %s: op on %r refused", session.id, name)
            continue
        grouped.setdefault(name, []).append(op)
    return grouped


async def _files_written(memory: MemoryStore, partner: Partner, source: str) -> set[str]:
    """The files holding a memory edit from ``source`` by a run that went on to write
    its journal entry (the last thing a review writes); none when no run got so far."""
    changes = [c for c in await memory.changes(partner.dir) if c.source == source]
    if not any(change.op == "append" for change in changes):
        return set()
    return {change.file for change in changes if change.op != "append"}


async def _removes_too_much(
    memory: MemoryStore, file: MemoryFile, ops: list[dict[str, Any]]
) -> bool:
    """Whether this batch of ``ops`` on ``file`` trips the removal guard."""
    entries = await memory.entries(file)
    removing = sum(1 for op in ops if op.get("op") in ("remove", "replace"))
    return removes_too_much(len(entries), removing)


async def _apply_one(
    memory: MemoryStore, file: MemoryFile, op: dict[str, Any], source: str
) -> str | None:
    """Apply one edit (add, replace or remove) to ``file``; the id of its change, None when
    the memory store wrote nothing."""
    kind = op.get("op")
    text = str(op.get("text") or "")
    old = str(op.get("old") or "")
    reason = str(op.get("reason") or "review")
    if kind == "add":
        result = await memory.add(file, text, reason=reason, source=source)
    elif kind == "replace":
        if not text.strip():
            raise MemoryInputError("replace needs new text")
        result = await memory.replace_text(file, old, text, reason=reason, source=source)
    elif kind == "remove":
        result = await memory.replace_text(file, old, "", reason=reason, source=source)
    else:
        raise MemoryInputError(f"unknown op {kind!r}")
    return result.change_id


async def journal_author(store: Store, partner: Partner, session: SessionRow) -> str:
    """Who the journal entry of a per-user partner's session is about (name and marker);
    empty for a partner shared by all or a session of no one user."""
    if not partner.per_user or session.user_key is None:
        return ""
    user = await store.user(session.user_key)
    name = (user["display_name"] if user else "") or session.user_key
    return f"{name} {user_marker(session.user_key)}"


async def write_journal(
    memory: MemoryStore,
    store: Store,
    partner: Partner,
    session: SessionRow,
    entry: JournalEntry,
    *,
    now: datetime,
    title: str,
    upto: int,
) -> None:
    """Append the entry once per reviewed segment: a review cut off between this write
    and its watermark runs again, and must not write a second entry for the same part."""
    who = await journal_author(store, partner, session)
    day = now.date().isoformat()
    file = journal_file(partner, day)
    source = segment_source(session, upto)
    if not await _journal_written(memory, partner, file, source):
        block = render(entry, now, title, session.chat_key, who)
        await memory.append(file, block, header=day_header(day), reason="journal", source=source)
    await store.add_message(
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


async def _journal_written(
    memory: MemoryStore, partner: Partner, file: MemoryFile, source: str
) -> bool:
    """Whether a journal block from ``source`` is in the file (its changelog record comes
    first, so a record alone may be a write that never happened)."""
    for change in reversed(await memory.changes(partner.dir)):
        if change.op == "append" and change.file == file.name and change.source == source:
            written = (await memory.read(file)).replace("\r\n", "\n")
            return (change.new or "").rstrip("\n") in written
    return False
