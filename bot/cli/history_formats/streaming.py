"""The large JSON exports (Telegram Desktop's ``result.json``, ChatGPT's
``conversations.json``) read as a stream of parse events (ijson, on its C parser), never held
whole: memory follows the largest message, not the file.

Every value is bounded while it is read, as every decoder is: one message (an item of the
list being imported) or any single value outside one may take at most :data:`MAX_ITEM_BYTES`
of the file, and nothing may nest deeper than :data:`MAX_DEPTH`. A file that is not JSON is
refused naming the line and column where the parser stopped. :func:`items` then reads the
items of one list, each built by the C parser; it is used on a file :func:`bounded_events`
already read through, so every item is known to fit."""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from bot.cli.history_formats.messages import BadHistory

MAX_ITEM_BYTES = 4 * 1024 * 1024
"""The most of the file one message (or one value outside the messages) may take. Telegram
caps a message at 4,096 characters; with its entities spelled out twice that is tens of kB.
It is checked at each read of :data:`CHUNK` bytes, so a value is refused once it is over it by
two reads at most."""
CHUNK = 64 * 1024
"""What the parser reads at a time."""
MAX_DEPTH = 64
"""How deep objects and lists may nest, the export's own levels included."""
BOM = b"\xef\xbb\xbf"
OPENING = frozenset(("start_map", "start_array"))
CLOSING = frozenset(("end_map", "end_array"))
Event = tuple[str, str, Any]


class _TooLarge(Exception):
    """Raised from inside the parser's read: the value being read is over the limit."""


class _TooDeep(Exception):
    """Objects and lists nest deeper than :data:`MAX_DEPTH`."""


class Source:
    """A file's bytes as the parser reads them (a UTF-8 BOM skipped), counted. ``mark`` is
    where the value being read began; a read that would take it past ``limit`` is refused.
    From ``slow_from`` on (locating a syntax error) the parser gets one byte a read, so the
    byte it stopped at is the last one handed over."""

    def __init__(self, file: BinaryIO, limit: int | None, slow_from: int | None = None) -> None:
        self._file = file
        self.offset = 0
        """Bytes handed to the parser."""
        self.chunk_start = 0
        """Where the last read began: a syntax error lies in the bytes from here."""
        self.mark = 0
        self.limit = limit
        self._slow_from = slow_from
        self.lines = 1
        """(Slow mode) the line of the next byte, and how many characters of it came before."""
        self.column = 0

    def read(self, size: int) -> bytes:
        if self.limit is not None and self.offset - self.mark > self.limit:
            raise _TooLarge
        if self._slow_from is not None and size:
            size = 1 if self.offset >= self._slow_from else min(size, self._slow_from - self.offset)
        chunk = self._file.read(size)
        self.chunk_start = self.offset
        self.offset += len(chunk)
        if self._slow_from is not None:
            self._count_lines(chunk)
        return chunk

    def _count_lines(self, chunk: bytes) -> None:
        newlines = chunk.count(b"\n")
        if newlines:
            self.lines += newlines
            self.column = 0
            chunk = chunk[chunk.rindex(b"\n") + 1 :]
        # characters, not bytes: a UTF-8 continuation byte (10xxxxxx) starts none
        self.column += len(chunk) - sum(chunk.count(bytes((b,))) for b in range(0x80, 0xC0))


@dataclass(frozen=True)
class Stamp:
    """What a file was when its first read began: a second read of a changed file is refused."""

    size: int
    modified: int


@contextmanager
def opened(
    path: Path, limit: int | None = MAX_ITEM_BYTES, slow_from: int | None = None
) -> Iterator[tuple[Source, Stamp]]:
    with path.open("rb") as file:
        status = os.fstat(file.fileno())
        if file.read(len(BOM)) != BOM:
            file.seek(0)
        yield Source(file, limit, slow_from), Stamp(status.st_size, status.st_mtime_ns)


def bounded_events(
    source: Source, items: Container[str], wanted: Container[str]
) -> Iterator[Event]:
    """The file's parse events at the prefixes ``wanted`` (and the document's own, the
    first), every value bounded as the module says: each item at a prefix of ``items`` (a
    message) as a whole, every other value on its own. Map keys are left out. Raises ijson's
    JSONError for a file that is not JSON (:func:`refusals` says where)."""
    depth = 0
    inside = False  # in an item: its size counts from where it began
    for event in ijson.parse(source, buf_size=CHUNK, use_float=True):
        prefix, kind, _ = event
        if kind == "map_key":
            continue
        if kind in OPENING:
            depth += 1
            if depth > MAX_DEPTH:
                raise _TooDeep
            if prefix in items:
                inside = True
                source.mark = source.offset
        elif kind in CLOSING:
            depth -= 1
            if prefix in items:
                inside = False
        if not inside:
            source.mark = source.offset
        if prefix in wanted or not prefix:
            yield event


@contextmanager
def refusals(
    path: Path, source: Source, where: Callable[[], str], item: str = "message"
) -> Iterator[None]:
    """A read's failures as :class:`BadHistory` naming the file, and for a value out of
    bounds ``where`` it is (the ``item`` being read, as the caller knows it)."""
    try:
        yield
    except _TooLarge:
        raise BadHistory(
            f"{path}: {where()}: more than {source.limit:,} bytes of JSON in one {item} "
            "(or one value); is this the export as the app wrote it?"
        ) from None
    except _TooDeep:
        raise BadHistory(f"{path}: {where()}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except BadHistory as exc:
        raise BadHistory(f"{path}: {exc}") from None
    except ijson.JSONError as exc:
        raise not_json(path, source, exc) from None


def not_json(path: Path, source: Source, error: Exception) -> BadHistory:
    """The refusal of a file the parser stopped in, with the line and column where it
    stopped: the last chunk it read is read again a byte at a time to find it."""
    reason = error.args[0] if error.args else error
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", errors="replace")
    reason = str(reason).splitlines()[0] if str(reason).strip() else "not JSON"
    with opened(path, None, slow_from=source.chunk_start) as (again, _):
        try:
            for _ in ijson.basic_parse(again, buf_size=CHUNK):
                pass
        except ijson.JSONError:
            return BadHistory(
                f"{path}: not JSON (line {again.lines}, column {again.column}: {reason})"
            )
    return BadHistory(f"{path}: not JSON (near byte {source.chunk_start:,}: {reason})")


def items(path: Path, prefix: str, stamp: Stamp) -> Iterator[Any]:
    """The items of the list at ``prefix``, each built whole (by the C parser), of a file
    :func:`bounded_events` read through when it was as ``stamp`` says."""
    with opened(path, limit=None) as (source, now):
        if now != stamp:
            raise BadHistory(f"{path}: the file changed while it was read; import it again")
        try:
            yield from ijson.items(source, prefix, buf_size=CHUNK, use_float=True)
        except ijson.JSONError:
            raise BadHistory(
                f"{path}: the file changed while it was read; import it again"
            ) from None
