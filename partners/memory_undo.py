"""Undoing one recorded change of memory, as a new change of its own.

The changelog (:mod:`partners.changelog`) keeps what each write did; undoing reads that record
and makes the opposite write through :class:`partners.memory.MemoryStore`, so the undo is
recorded too (and can itself be undone). What was forgotten on request cannot be undone:
its record holds no text to bring back.
"""

from __future__ import annotations

from pathlib import Path

from partners.changelog import Change
from partners.entry_text import comparable
from partners.memory import MemoryFile, MemoryStore, WriteResult
from partners.memory_errors import MemoryInputError
from partners.memory_format import MarkdownDocument, fingerprint, new_entry_id


def undoable(change: Change) -> bool:
    """Whether :func:`undo` can reverse ``change`` from its record alone (what a page offers
    Undo on): not a forgetting, nor a change whose record holds no text to bring back."""
    if change.op == "replace_file":
        return change.old is not None and change.new is not None
    if change.op == "add":
        return bool(change.entry)
    if change.op == "edit":
        return bool(change.entry and change.old)
    if change.op == "replace":
        return change.old is not None and bool(change.new)
    if change.op == "remove":
        return bool(change.old) or (change.old is not None and bool(change.new))
    return False


async def undo(memory: MemoryStore, root: Path, change_id: str, *, source: str) -> WriteResult:
    """Reverse one recorded change of the namespace ``root``, as a new change of its own."""
    change = next((c for c in await memory.changes(root) if c.id == change_id), None)
    if change is None:
        raise MemoryInputError(
            f"no change {change_id} in the changelog (it keeps the last "
            f"{memory.changelog.keep}); list recent changes to find its id"
        )
    if change.op == "forgotten":
        raise MemoryInputError(
            f"change {change_id} was forgotten on request; forgetting cannot be undone"
        )
    file = MemoryFile(root, change.file)
    reason = f"undo {change.id}"
    if change.op == "replace_file" and change.old is not None and change.new is not None:
        expected = fingerprint(change.new.encode("utf-8"))
        return await memory.replace_file(file, change.old, expected, reason=reason, source=source)
    if change.op == "add" and change.entry:
        return await memory.remove(file, change.entry, reason=reason, source=source)
    if change.op == "edit" and change.entry and change.old:
        return await memory.edit(file, change.entry, change.old, reason=reason, source=source)
    if change.op == "remove" and change.entry and change.old:
        return await _restore_entry(memory, file, change, reason, source)
    if change.op in ("replace", "remove") and change.old is not None and change.new:
        return await _replace_line(memory, file, change.new, change.old, reason, source)
    if change.op == "remove" and change.old:
        return await _restore_line(memory, file, change.old, reason, source)
    raise MemoryInputError(f"change {change_id} ({change.op}) cannot be undone")


async def _replace_line(
    memory: MemoryStore, file: MemoryFile, current: str, wanted: str, reason: str, source: str
) -> WriteResult:
    def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
        if doc.lines.count(current) != 1:
            raise MemoryInputError(f"{file.name} changed since; undo it by hand")
        number = doc.lines.index(current)
        change = memory.new_change(file, "replace", None, current, wanted, reason, source)
        doc.lines[number] = wanted
        return change, WriteResult(None, change.id)

    return await memory.update(file, apply)


async def _restore_line(
    memory: MemoryStore, file: MemoryFile, line: str, reason: str, source: str
) -> WriteResult:
    def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
        if line in doc.lines:
            return None, WriteResult(None, None, duplicate=True)
        change = memory.new_change(file, "replace", None, "", line, reason, source)
        doc.lines.append(line)
        doc.trailing_newline = True
        return change, WriteResult(None, change.id)

    return await memory.update(file, apply)


async def _restore_entry(
    memory: MemoryStore, file: MemoryFile, change: Change, reason: str, source: str
) -> WriteResult:
    old = change.old or ""

    def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
        for entry in doc.entries():
            if comparable(entry.text) == comparable(old):
                return None, WriteResult(entry.id, None, duplicate=True)
        entry_id = change.entry or new_entry_id()
        record = memory.new_change(file, "add", entry_id, None, old, reason, source)
        doc.lines.append(f"- {old} <!-- {entry_id} -->")
        doc.trailing_newline = True
        return record, WriteResult(entry_id, record.id)

    return await memory.update(file, apply)
