"""The data directory's lock: one process writes to it at a time; a second writer
(``companion chat`` while ``companion run`` runs) stops with a clear message."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_FILE = "gateway.lock"


class DataDirBusy(RuntimeError):
    """Another gateway process writes to this data directory."""


class DataDirLock:
    """An exclusive advisory lock (flock) held for the life of a writing process."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataDirBusy(
                f"{self.path.parent} is in use by a running gateway ({holder}). Stop it first, "
                "or use read-only commands (search, memory show, doctor) beside it."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._handle = handle

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
