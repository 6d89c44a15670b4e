"""Memory documents: entries with stable ids, one writer per document at a time, changelog.

A memory file is Markdown the owner may edit by hand. Entries are list items; the store tags an
entry it writes with an id comment (``- likes tea <!-- m_18c2f0a1b2c3d -->``) and never adds ids
to lines it did not write. Every write to one document waits its turn on that document's lock,
re-reads it (hand edits are never overwritten by a stale copy), appends a changelog record
*before* the change, and writes it back whole, keeping its BOM and CRLF line endings.

Namespaces (docs/architecture.md "Split memory model") are roots: ``data/owner`` for the owner and
``data/partners/<id>`` for a partner, whose per-user files live in ``users/``. Where the
documents are kept — files (the default) or rows of the database — is the
:class:`partners.documents.Documents` the store is given; the changelog
(:mod:`partners.changelog`) is one more document of the namespace.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from partners.changelog import Change, Changelog
from partners.documents import DocumentConflict, Documents, FileDocuments, StoredDocument
from partners.entry_text import comparable
from partners.parse_cache import ParseCache

MAX_ENTRY_CHARS = 240
ENTRY_ID = re.compile(r"\s*<!--\s*(m_[0-9a-z]+)\s*-->\s*$")
BULLET = re.compile(r"^(\s*[-*+]\s+)(.*)$")
ANY_ID_COMMENT = re.compile(r"\s*<!--\s*m_[0-9a-z]+\s*-->")
FINGERPRINT_CHARS = 12
BOM = "\ufeff"


class MemoryInputError(ValueError):
    """A write was refused; the message says what was wrong and what to do."""


class UnreadableFile(MemoryInputError):
    """A memory file holds bytes that are not UTF-8 (a hand edit saved in another encoding):
    nothing may rewrite it, or the bytes that could not be read would be lost."""

    def __init__(self, path: Path, position: int) -> None:
        super().__init__(
            f"{path.name} is not valid UTF-8 (byte {position}); open it in an editor and save "
            "it as UTF-8 — nothing was written"
        )
        self.path = path


@dataclass(frozen=True)
class Entry:
    id: str | None
    text: str
    line: int

    @property
    def created(self) -> datetime | None:
        """Ids carry the time they were written (milliseconds, hex)."""
        if self.id is None:
            return None
        try:
            millis = int(self.id[2:-4], 16)
        except ValueError:
            return None
        return datetime.fromtimestamp(millis / 1000, UTC)


@dataclass(frozen=True)
class MemoryFile:
    """One memory document: a namespace root and a path inside it."""

    root: Path
    name: str

    @property
    def path(self) -> Path:
        return self.root / self.name


@dataclass(frozen=True)
class WriteResult:
    entry_id: str | None
    change_id: str | None
    duplicate: bool = False


@dataclass
class _Document:
    lines: list[str]
    crlf: bool
    bom: bool
    trailing_newline: bool

    @classmethod
    def parse(cls, raw: str) -> _Document:
        bom = raw.startswith(BOM)
        if bom:
            raw = raw[1:]
        crlf = "\r\n" in raw
        trailing = raw.endswith("\n")
        body = raw.replace("\r\n", "\n")
        lines = body.split("\n")
        if trailing:
            lines.pop()
        if lines == [""]:
            lines = []
        return cls(lines, crlf, bom, trailing or not lines)

    def render(self) -> str:
        text = "\n".join(self.lines)
        if self.lines and self.trailing_newline:
            text += "\n"
        if self.crlf:
            text = text.replace("\n", "\r\n")
        return (BOM if self.bom else "") + text

    def entries(self) -> list[Entry]:
        found = []
        for number, line in enumerate(self.lines):
            match = BULLET.match(line)
            if not match:
                continue
            body = match.group(2)
            id_match = ENTRY_ID.search(body)
            entry_id = id_match.group(1) if id_match else None
            text = body[: id_match.start()] if id_match else body
            if text.strip():
                found.append(Entry(entry_id, text.strip(), number))
        return found


def fingerprint(data: bytes) -> str:
    """A file version as the owner handles it: the first hex digits of its sha256."""
    return hashlib.sha256(data).hexdigest()[:FINGERPRINT_CHARS]


class FileChanged(MemoryInputError):
    """A whole-file replacement was refused: the file is no longer the version it edits."""

    def __init__(self, name: str, current: bytes) -> None:
        super().__init__(
            f"{name} changed since that copy was made (a review or another edit wrote to it); "
            "nothing was overwritten"
        )
        self.current = current


def new_entry_id() -> str:
    return f"m_{int(time.time() * 1000):x}{secrets.token_hex(2)}"


def new_change_id() -> str:
    return f"c_{int(time.time() * 1000):x}{secrets.token_hex(2)}"


def strip_ids(text: str) -> str:
    """Remove entry id comments: they cost tokens in a prompt and mean nothing to the model."""
    return ANY_ID_COMMENT.sub("", text)


def text_hash(text: str) -> str:
    """What a tombstone keeps of forgotten text: a hash of it, never the text."""
    return hashlib.sha256(comparable(text).encode()).hexdigest()[:32]


def clean_entry_text(text: str) -> str:
    """One line, no id comments, within the length limit; else MemoryInputError."""
    cleaned = " ".join(str(text).replace("<!--", "").replace("-->", "").split())
    if not cleaned:
        raise MemoryInputError("text is empty; say in one sentence what to remember")
    if len(cleaned) > MAX_ENTRY_CHARS:
        raise MemoryInputError(
            f"text is {len(cleaned)} characters; the limit is {MAX_ENTRY_CHARS} — "
            "keep one short fact per entry"
        )
    return cleaned


def read_text(path: Path) -> str:
    """A memory file for display or a prompt: missing is empty, undecodable bytes replaced."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace").removeprefix(BOM)
    except FileNotFoundError:
        return ""


class MemoryStore:
    """All reads and writes of memory documents go through here."""

    def __init__(self, changelog_keep: int = 500, documents: Documents | None = None) -> None:
        self.documents: Documents = documents if documents is not None else FileDocuments()
        self.changelog = Changelog(self.documents, changelog_keep)
        self._parsed: ParseCache[tuple[Entry, ...]] = ParseCache()

    @property
    def changelog_keep(self) -> int:
        return self.changelog.keep

    async def stored(self, file: MemoryFile) -> StoredDocument:
        """The document's bytes exactly as kept, and its version (for an owner's copy)."""
        return await self.documents.read(file.root, file.name)

    async def read(self, file: MemoryFile, *, strict: bool = False) -> str:
        """The file's text; ``strict`` raises UnreadableFile where display would replace
        bytes that are not UTF-8 (for a caller about to rewrite the file)."""
        data = (await self.stored(file)).data
        if strict:
            return _decoded(data, file).removeprefix(BOM)
        return data.decode("utf-8", errors="replace").removeprefix(BOM)

    async def entries(self, file: MemoryFile, *, strict: bool = False) -> list[Entry]:
        """The file's entries, as it is now (parsed again only when its bytes changed, see
        :mod:`partners.parse_cache`); ``strict`` as in :meth:`read`."""
        data = (await self.stored(file)).data
        return await asyncio.to_thread(self._entries_of, file, data, strict)

    def _entries_of(self, file: MemoryFile, data: bytes, strict: bool) -> list[Entry]:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if strict:
                raise UnreadableFile(file.path, exc.start) from exc
            # not kept: a strict read of these same bytes must still refuse them
            shown = data.decode("utf-8", errors="replace").removeprefix(BOM)
            return _Document.parse(shown).entries()

        def parse(_: bytes) -> tuple[Entry, ...]:
            return tuple(_Document.parse(text.removeprefix(BOM)).entries())

        return list(self._parsed.parsed(file.path, data, parse))

    async def add(self, file: MemoryFile, text: str, *, reason: str, source: str) -> WriteResult:
        cleaned = clean_entry_text(text)

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            for entry in doc.entries():
                if comparable(entry.text) == comparable(cleaned):
                    return None, WriteResult(entry.id, None, duplicate=True)
            entry_id = new_entry_id()
            change = self._change(file, "add", entry_id, None, cleaned, reason, source)
            doc.lines.append(f"- {cleaned} <!-- {entry_id} -->")
            doc.trailing_newline = True
            return change, WriteResult(entry_id, change.id)

        return await self._update(file, apply)

    async def edit(
        self, file: MemoryFile, entry_id: str, text: str, *, reason: str, source: str
    ) -> WriteResult:
        cleaned = clean_entry_text(text)

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            entry = _find(doc, entry_id, file)
            for other in doc.entries():
                if other.id != entry_id and comparable(other.text) == comparable(cleaned):
                    return None, WriteResult(other.id, None, duplicate=True)
            change = self._change(file, "edit", entry_id, entry.text, cleaned, reason, source)
            prefix = BULLET.match(doc.lines[entry.line])
            bullet = prefix.group(1) if prefix else "- "
            doc.lines[entry.line] = f"{bullet}{cleaned} <!-- {entry_id} -->"
            return change, WriteResult(entry_id, change.id)

        return await self._update(file, apply)

    async def remove(
        self, file: MemoryFile, entry_id: str, *, reason: str, source: str
    ) -> WriteResult:
        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            entry = _find(doc, entry_id, file)
            change = self._change(file, "remove", entry_id, entry.text, None, reason, source)
            del doc.lines[entry.line]
            return change, WriteResult(entry_id, change.id)

        return await self._update(file, apply)

    async def replace_text(
        self, file: MemoryFile, old: str, new: str, *, reason: str, source: str
    ) -> WriteResult:
        """Replace text that appears verbatim exactly once (the review's edit; never a
        whole-file rewrite). An empty ``new`` removes it, and the line if nothing is left."""
        if not old.strip():
            raise MemoryInputError("old text is empty; quote the exact text to change")
        new = " ".join(new.replace("<!--", "").replace("-->", "").split())
        if len(new) > MAX_ENTRY_CHARS:
            raise MemoryInputError(f"new text is over {MAX_ENTRY_CHARS} characters")

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            count = sum(text.count(old) for text in doc.lines)
            if count != 1:
                raise MemoryInputError(
                    f"the old text appears {count} times in {file.name}; it must appear "
                    "exactly once — quote more of it"
                )
            for number, line in enumerate(doc.lines):
                if old not in line:
                    continue
                changed = line.replace(old, new)
                bullet = BULLET.match(changed)
                rest = ENTRY_ID.sub("", bullet.group(2)) if bullet else changed
                kept = bool(rest.strip())
                op = "replace" if new else "remove"
                change = self._change(
                    file, op, None, line, changed if kept else None, reason, source
                )
                if kept:
                    doc.lines[number] = changed
                else:
                    del doc.lines[number]
                return change, WriteResult(None, change.id)
            raise AssertionError("counted one occurrence but found none")

        return await self._update(file, apply)

    async def append(
        self, file: MemoryFile, block: str, *, header: str, reason: str, source: str
    ) -> WriteResult:
        """Append a block (a journal entry), starting the file with ``header`` if it is new."""

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            change = self._change(file, "append", None, None, block, reason, source)
            if not doc.lines:
                doc.lines = [header]
            if doc.lines[-1].strip():
                doc.lines.append("")
            doc.lines.extend(block.rstrip("\n").split("\n"))
            doc.trailing_newline = True
            return change, WriteResult(None, change.id)

        return await self._update(file, apply)

    async def insert_after_header(
        self, file: MemoryFile, line: str, *, reason: str, source: str
    ) -> WriteResult:
        """Put one line right under the file's first heading (the journal's day line)."""

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            change = self._change(file, "insert", None, None, line, reason, source)
            at = 1 if doc.lines and doc.lines[0].startswith("#") else 0
            doc.lines[at:at] = [line, ""] if at < len(doc.lines) else [line]
            return change, WriteResult(None, change.id)

        return await self._update(file, apply)

    # ---- forgetting: the text leaves every file, records keep no copy --------------------

    async def forget_entry(self, file: MemoryFile, entry_id: str, *, source: str) -> Entry:
        """Delete one entry; its changelog record carries no text (a tombstone)."""
        removed: list[Entry] = []

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            entry = _find(doc, entry_id, file)
            removed.append(entry)
            change = self._change(file, "forgotten", entry_id, None, None, "forgotten", source)
            del doc.lines[entry.line]
            return change, WriteResult(entry_id, change.id)

        await self._update(file, apply)
        return removed[0]

    async def clear_file(self, file: MemoryFile, *, source: str) -> None:
        """Empty a file entirely (``/forget all``), recording that it happened, not what."""

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            if not any(line.strip() for line in doc.lines):
                return None, WriteResult(None, None)
            change = self._change(file, "forgotten", None, None, None, "forgotten", source)
            doc.lines = []
            return change, WriteResult(None, change.id)

        await self._update(file, apply)

    async def forget_lines(
        self, file: MemoryFile, keep: Callable[[list[str]], list[str]], *, source: str
    ) -> bool:
        """Rewrite a file through ``keep``, which returns its lines without what is forgotten;
        the changelog records that it happened, never what. False if nothing changed."""

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            kept = keep(doc.lines)
            if kept == doc.lines:
                return None, WriteResult(None, None)
            doc.lines = kept
            change = self._change(file, "forgotten", None, None, None, "forgotten", source)
            return change, WriteResult(None, change.id)

        return (await self._update(file, apply)).change_id is not None

    async def scrub_changelog(
        self,
        root: Path,
        file_name: str,
        *,
        entry_ids: set[str],
        texts: set[str],
        whole_file: bool = False,
        gone_from: set[str] | None = None,
        quotes_in: set[str] | None = None,
    ) -> int:
        """Replace changelog records that hold forgotten text with text-less tombstones
        (see :meth:`partners.changelog.Changelog.scrub`)."""

        async def read_text(root: Path, name: str) -> str:
            return await self.read(MemoryFile(root, name))

        return await self.changelog.scrub(
            root,
            file_name,
            read_text,
            entry_ids=entry_ids,
            texts=texts,
            whole_file=whole_file,
            gone_from=gone_from,
            quotes_in=quotes_in,
        )

    async def replace_file(
        self, file: MemoryFile, new_text: str, expected: str, *, reason: str, source: str
    ) -> WriteResult:
        """Replace a whole file with the owner's edited copy, only if the file is still the
        version that copy was made from (``expected`` is its :func:`fingerprint`): a memory a
        review wrote meanwhile is never silently overwritten (FileChanged). The file keeps its
        own line endings and BOM, and the changelog record holds both versions."""
        async with self.documents.lock(file.root, file.name):
            stored = await self.stored(file)
            if fingerprint(stored.data) != expected:
                raise FileChanged(file.name, stored.data)
            old_raw = _decoded(stored.data, file)
            old, new = _Document.parse(old_raw), _Document.parse(new_text)
            if "\n" in old_raw:
                new.crlf = old.crlf
            if old_raw:
                new.bom = old.bom
            rendered = new.render()
            if rendered == old_raw:
                return WriteResult(None, None, duplicate=True)
            change = self._change(file, "replace_file", None, old_raw, rendered, reason, source)
            await self._write(file, stored, change, rendered)
            return WriteResult(None, change.id)

    async def _update(
        self, file: MemoryFile, apply: Callable[[_Document], tuple[Change | None, WriteResult]]
    ) -> WriteResult:
        async with self.documents.lock(file.root, file.name):
            stored = await self.stored(file)

            def changed() -> tuple[_Document, Change | None, WriteResult]:
                doc = _Document.parse(_decoded(stored.data, file))
                change, result = apply(doc)
                return doc, change, result

            doc, change, result = await asyncio.to_thread(changed)
            if change is not None:
                await self._write(file, stored, change, doc.render())
            return result

    async def _write(
        self, file: MemoryFile, stored: StoredDocument, change: Change, text: str
    ) -> None:
        """Record the change, then write the document over the version it was made from."""
        await self.changelog.append(file.root, change)
        try:
            await self.documents.write(file.root, file.name, text.encode("utf-8"), stored.version)
        except DocumentConflict as exc:
            # only a writer that bypassed the lock (a hand edit in the instant between our
            # read and write, a worker whose database lock died with its connection) gets here
            raise FileChanged(file.name, exc.current.data) from exc
        finally:
            self._parsed.drop(file.path)

    def _change(
        self,
        file: MemoryFile,
        op: str,
        entry: str | None,
        old: str | None,
        new: str | None,
        reason: str,
        source: str,
    ) -> Change:
        return Change(
            id=new_change_id(),
            time=datetime.now(UTC).isoformat(timespec="seconds"),
            file=file.name,
            op=op,
            entry=entry,
            old=old,
            new=new,
            reason=reason[:500],
            source=source,
        )

    # ---- changelog -------------------------------------------------------------------

    async def changes(self, root: Path) -> list[Change]:
        return await self.changelog.records(root)

    async def undo(self, root: Path, change_id: str, *, source: str) -> WriteResult:
        """Reverse one recorded change, as a new change of its own."""
        change = next((c for c in await self.changes(root) if c.id == change_id), None)
        if change is None:
            raise MemoryInputError(
                f"no change {change_id} in the changelog (it keeps the last "
                f"{self.changelog.keep}); list recent changes to find its id"
            )
        if change.op == "forgotten":
            raise MemoryInputError(
                f"change {change_id} was forgotten on request; forgetting cannot be undone"
            )
        file = MemoryFile(root, change.file)
        reason = f"undo {change.id}"
        if change.op == "replace_file" and change.old is not None and change.new is not None:
            expected = fingerprint(change.new.encode("utf-8"))
            return await self.replace_file(file, change.old, expected, reason=reason, source=source)
        if change.op == "add" and change.entry:
            return await self.remove(file, change.entry, reason=reason, source=source)
        if change.op == "edit" and change.entry and change.old:
            return await self.edit(file, change.entry, change.old, reason=reason, source=source)
        if change.op == "remove" and change.entry and change.old:
            return await self._restore(file, change, reason=reason, source=source)
        if change.op in ("replace", "remove") and change.old is not None and change.new:
            return await self._replace_line(file, change.new, change.old, reason, source)
        if change.op == "remove" and change.old:
            return await self._restore_line(file, change.old, reason, source)
        raise MemoryInputError(f"change {change_id} ({change.op}) cannot be undone")

    async def _replace_line(
        self, file: MemoryFile, current: str, wanted: str, reason: str, source: str
    ) -> WriteResult:
        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            if doc.lines.count(current) != 1:
                raise MemoryInputError(f"{file.name} changed since; undo it by hand")
            number = doc.lines.index(current)
            change = self._change(file, "replace", None, current, wanted, reason, source)
            doc.lines[number] = wanted
            return change, WriteResult(None, change.id)

        return await self._update(file, apply)

    async def _restore_line(
        self, file: MemoryFile, line: str, reason: str, source: str
    ) -> WriteResult:
        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            if line in doc.lines:
                return None, WriteResult(None, None, duplicate=True)
            change = self._change(file, "replace", None, "", line, reason, source)
            doc.lines.append(line)
            doc.trailing_newline = True
            return change, WriteResult(None, change.id)

        return await self._update(file, apply)

    async def _restore(
        self, file: MemoryFile, change: Change, *, reason: str, source: str
    ) -> WriteResult:
        old = change.old or ""

        def apply(doc: _Document) -> tuple[Change | None, WriteResult]:
            for entry in doc.entries():
                if comparable(entry.text) == comparable(old):
                    return None, WriteResult(entry.id, None, duplicate=True)
            entry_id = change.entry or new_entry_id()
            record = self._change(file, "add", entry_id, None, old, reason, source)
            doc.lines.append(f"- {old} <!-- {entry_id} -->")
            doc.trailing_newline = True
            return record, WriteResult(entry_id, record.id)

        return await self._update(file, apply)


def _find(doc: _Document, entry_id: str, file: MemoryFile) -> Entry:
    for entry in doc.entries():
        if entry.id == entry_id:
            return entry
    raise MemoryInputError(
        f"no entry {entry_id} in {file.name}; read the memory first to see the current ids"
    )


def _decoded(data: bytes, file: MemoryFile) -> str:
    """A document's text for a rewrite: bytes that are not UTF-8 refuse it (UnreadableFile)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(file.path, exc.start) from exc


def record_as_dict(change: Change) -> dict[str, Any]:
    return asdict(change)
