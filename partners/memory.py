"""Memory documents: the store every read and write of one goes through.

Every write to one document waits its turn on that document's lock, re-reads it (hand edits
are never overwritten by a stale copy), appends a changelog record *before* the change, and
writes it back whole. The Markdown form of a document and its entries is
:mod:`partners.memory_format`; undoing a recorded change is :mod:`partners.memory_undo`.

Namespaces (docs/architecture.md "Split memory model") are roots: ``data/owner`` for the owner and
``data/partners/<id>`` for a partner, whose per-user files live in ``users/``. Where the
documents are kept — files (the default) or rows of the database — is the
:class:`partners.documents.Documents` the store is given; the changelog
(:mod:`partners.changelog`) is one more document of the namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from partners.changelog import Change, Changelog
from partners.documents import DocumentConflict, Documents, FileDocuments, StoredDocument
from partners.entry_text import comparable
from partners.memory_errors import FileChanged, MemoryInputError, UnreadableFile
from partners.memory_format import (
    BOM,
    BULLET,
    ENTRY_ID,
    MAX_ENTRY_CHARS,
    Entry,
    MarkdownDocument,
    clean_entry_text,
    decoded_for_rewrite,
    fingerprint,
    new_change_id,
    new_entry_id,
)
from partners.parse_cache import ParseCache


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


ApplyChange = Callable[[MarkdownDocument], tuple[Change | None, WriteResult]]
"""An edit of a parsed document: the change to record (None: nothing to write), and what the
write returns."""


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
            return decoded_for_rewrite(data, file.path).removeprefix(BOM)
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
            return MarkdownDocument.parse(shown).entries()

        def parse(_: bytes) -> tuple[Entry, ...]:
            return tuple(MarkdownDocument.parse(text.removeprefix(BOM)).entries())

        return list(self._parsed.parsed(file.path, data, parse))

    async def add(self, file: MemoryFile, text: str, *, reason: str, source: str) -> WriteResult:
        cleaned = clean_entry_text(text)

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            for entry in doc.entries():
                if comparable(entry.text) == comparable(cleaned):
                    return None, WriteResult(entry.id, None, duplicate=True)
            entry_id = new_entry_id()
            change = self.new_change(file, "add", entry_id, None, cleaned, reason, source)
            doc.lines.append(f"- {cleaned} <!-- {entry_id} -->")
            doc.trailing_newline = True
            return change, WriteResult(entry_id, change.id)

        return await self.update(file, apply)

    async def edit(
        self, file: MemoryFile, entry_id: str, text: str, *, reason: str, source: str
    ) -> WriteResult:
        cleaned = clean_entry_text(text)

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            entry = doc.find(entry_id, file.name)
            for other in doc.entries():
                if other.id != entry_id and comparable(other.text) == comparable(cleaned):
                    return None, WriteResult(other.id, None, duplicate=True)
            change = self.new_change(file, "edit", entry_id, entry.text, cleaned, reason, source)
            prefix = BULLET.match(doc.lines[entry.line])
            bullet = prefix.group(1) if prefix else "- "
            doc.lines[entry.line] = f"{bullet}{cleaned} <!-- {entry_id} -->"
            return change, WriteResult(entry_id, change.id)

        return await self.update(file, apply)

    async def remove(
        self, file: MemoryFile, entry_id: str, *, reason: str, source: str
    ) -> WriteResult:
        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            entry = doc.find(entry_id, file.name)
            change = self.new_change(file, "remove", entry_id, entry.text, None, reason, source)
            del doc.lines[entry.line]
            return change, WriteResult(entry_id, change.id)

        return await self.update(file, apply)

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

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
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
                change = self.new_change(
                    file, op, None, line, changed if kept else None, reason, source
                )
                if kept:
                    doc.lines[number] = changed
                else:
                    del doc.lines[number]
                return change, WriteResult(None, change.id)
            raise AssertionError("counted one occurrence but found none")

        return await self.update(file, apply)

    async def append(
        self, file: MemoryFile, block: str, *, header: str, reason: str, source: str
    ) -> WriteResult:
        """Append a block (a journal entry), starting the file with ``header`` if it is new."""

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            change = self.new_change(file, "append", None, None, block, reason, source)
            if not doc.lines:
                doc.lines = [header]
            if doc.lines[-1].strip():
                doc.lines.append("")
            doc.lines.extend(block.rstrip("\n").split("\n"))
            doc.trailing_newline = True
            return change, WriteResult(None, change.id)

        return await self.update(file, apply)

    async def insert_after_header(
        self, file: MemoryFile, line: str, *, reason: str, source: str
    ) -> WriteResult:
        """Put one line right under the file's first heading (the journal's day line)."""

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            change = self.new_change(file, "insert", None, None, line, reason, source)
            at = 1 if doc.lines and doc.lines[0].startswith("#") else 0
            doc.lines[at:at] = [line, ""] if at < len(doc.lines) else [line]
            return change, WriteResult(None, change.id)

        return await self.update(file, apply)

    # ---- forgetting: the text leaves every file, records keep no copy --------------------

    async def forget_entry(self, file: MemoryFile, entry_id: str, *, source: str) -> Entry:
        """Delete one entry; its changelog record carries no text (a tombstone)."""
        removed: list[Entry] = []

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            entry = doc.find(entry_id, file.name)
            removed.append(entry)
            change = self.new_change(file, "forgotten", entry_id, None, None, "forgotten", source)
            del doc.lines[entry.line]
            return change, WriteResult(entry_id, change.id)

        await self.update(file, apply)
        return removed[0]

    async def clear_file(self, file: MemoryFile, *, source: str) -> None:
        """Empty a file entirely (``/forget all``), recording that it happened, not what."""

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            if not any(line.strip() for line in doc.lines):
                return None, WriteResult(None, None)
            change = self.new_change(file, "forgotten", None, None, None, "forgotten", source)
            doc.lines = []
            return change, WriteResult(None, change.id)

        await self.update(file, apply)

    async def forget_lines(
        self, file: MemoryFile, keep: Callable[[list[str]], list[str]], *, source: str
    ) -> bool:
        """Rewrite a file through ``keep``, which returns its lines without what is forgotten;
        the changelog records that it happened, never what. False if nothing changed."""

        def apply(doc: MarkdownDocument) -> tuple[Change | None, WriteResult]:
            kept = keep(doc.lines)
            if kept == doc.lines:
                return None, WriteResult(None, None)
            doc.lines = kept
            change = self.new_change(file, "forgotten", None, None, None, "forgotten", source)
            return change, WriteResult(None, change.id)

        return (await self.update(file, apply)).change_id is not None

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
            old_raw = decoded_for_rewrite(stored.data, file.path)
            old, new = MarkdownDocument.parse(old_raw), MarkdownDocument.parse(new_text)
            if "\n" in old_raw:
                new.crlf = old.crlf
            if old_raw:
                new.bom = old.bom
            rendered = new.render()
            if rendered == old_raw:
                return WriteResult(None, None, duplicate=True)
            change = self.new_change(file, "replace_file", None, old_raw, rendered, reason, source)
            await self._write(file, stored, change, rendered)
            return WriteResult(None, change.id)

    async def update(self, file: MemoryFile, apply: ApplyChange) -> WriteResult:
        """Apply one edit to the document as it is now, under its lock, and write it back with
        its changelog record (every write of the store, and undo, comes through here)."""
        async with self.documents.lock(file.root, file.name):
            stored = await self.stored(file)

            def changed() -> tuple[MarkdownDocument, Change | None, WriteResult]:
                doc = MarkdownDocument.parse(decoded_for_rewrite(stored.data, file.path))
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

    def new_change(
        self,
        file: MemoryFile,
        op: str,
        entry: str | None,
        old: str | None,
        new: str | None,
        reason: str,
        source: str,
    ) -> Change:
        """The changelog record of a write to ``file``, with a fresh id and the time now."""
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
