"""The Markdown form of a memory document: its entries, their ids, and the text rules.

A memory file is Markdown the owner may edit by hand. Entries are list items; the store tags an
entry it writes with an id comment (``- likes tea <!-- m_18c2f0a1b2c3d -->``) and never adds ids
to lines it did not write. :class:`MarkdownDocument` reads a document into lines and writes it
back whole, keeping its BOM, its CRLF line endings and whether it ended with a line break.
Here too: what an entry's text may be, how ids are made, and the hashes that stand for a
file's version (:func:`fingerprint`) and for forgotten text (:func:`text_hash`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from partners.entry_text import comparable
from partners.memory_errors import MemoryInputError, UnreadableFile

MAX_ENTRY_CHARS = 240
ENTRY_ID = re.compile(r"\s*<!--\s*(m_[0-9a-z]+)\s*-->\s*$")
BULLET = re.compile(r"^(\s*[-*+]\s+)(.*)$")
ANY_ID_COMMENT = re.compile(r"\s*<!--\s*m_[0-9a-z]+\s*-->")
FINGERPRINT_CHARS = 12
BOM = "\ufeff"


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


@dataclass
class MarkdownDocument:
    """A document's lines, and how to write them back as they came (BOM, CRLF, last break)."""

    lines: list[str]
    crlf: bool
    bom: bool
    trailing_newline: bool

    @classmethod
    def parse(cls, raw: str) -> MarkdownDocument:
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

    def find(self, entry_id: str, name: str) -> Entry:
        """The entry of that id in the document called ``name``; else MemoryInputError."""
        for entry in self.entries():
            if entry.id == entry_id:
                return entry
        raise MemoryInputError(
            f"no entry {entry_id} in {name}; read the memory first to see the current ids"
        )


def fingerprint(data: bytes) -> str:
    """A file version as the owner handles it: the first hex digits of its sha256."""
    return hashlib.sha256(data).hexdigest()[:FINGERPRINT_CHARS]


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


def decoded_for_rewrite(data: bytes, path: Path) -> str:
    """A document's text for a rewrite: bytes that are not UTF-8 refuse it (UnreadableFile)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(path, exc.start) from exc
