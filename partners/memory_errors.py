"""The errors a memory write can give: each message says what was wrong and what to do.

Raised by :mod:`partners.memory_format` (entry text out of bounds, a file that is not UTF-8)
and by :class:`partners.memory.MemoryStore` (an entry or a change that is not there, a file
changed since the owner's copy of it was made).
"""

from __future__ import annotations

from pathlib import Path


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


class FileChanged(MemoryInputError):
    """A whole-file replacement was refused: the file is no longer the version it edits."""

    def __init__(self, name: str, current: bytes) -> None:
        super().__init__(
            f"{name} changed since that copy was made (a review or another edit wrote to it); "
            "nothing was overwritten"
        )
        self.current = current
