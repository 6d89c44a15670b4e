"""Parsed memory documents kept between reads, keyed by the bytes they were parsed from.

A read still reads the whole document, but parses it only when those bytes changed: a memory
page of 5,000 entries is viewed far more often than it changes. The key is the content, not a
file's size, inode and mtime: a hand edit in place that keeps the size within one tick of the
file system's clock leaves all three alone. Hashing 5,000 entries (400 kB) takes about a
millisecond, parsing them about fifty. Parses run on worker threads, hence the lock."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

PARSED_DOCUMENTS_KEPT = 64
"""Documents whose parse is kept between reads (the most recently read)."""


class ParseCache(Generic[T]):
    """The last parse of each of the most recently read documents."""

    def __init__(self, kept: int = PARSED_DOCUMENTS_KEPT) -> None:
        self._kept = kept
        self._parsed: OrderedDict[Hashable, tuple[bytes, T]] = OrderedDict()
        self._lock = threading.Lock()

    def parsed(self, key: Hashable, data: bytes, parse: Callable[[bytes], T]) -> T:
        """``parse(data)``, or the parse kept from the same bytes. A parse that raises is
        not kept (a strict read of those bytes must raise again)."""
        digest = hashlib.sha256(data).digest()
        with self._lock:
            known = self._parsed.get(key)
            if known is not None and known[0] == digest:
                self._parsed.move_to_end(key)
                return known[1]
        result = parse(data)
        with self._lock:
            self._parsed[key] = (digest, result)
            self._parsed.move_to_end(key)
            while len(self._parsed) > self._kept:
                self._parsed.popitem(last=False)
        return result

    def drop(self, key: Hashable) -> None:
        """Forget a document's parse once the store rewrote it (forgotten text included)."""
        with self._lock:
            self._parsed.pop(key, None)
