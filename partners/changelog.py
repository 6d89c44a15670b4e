"""The changelog of a memory namespace: one JSON record per change to any of its documents, written
before the change, kept to the last ``keep`` records, and scrubbed of forgotten text
(docs/architecture.md "Forgetting is forgetting"). It is itself a document,
``changelog/changes.jsonl``, kept wherever the namespace's documents are (a file, or a row)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from partners.documents import DocumentConflict, Documents
from partners.entry_text import comparable, quotes

CHANGELOG = "changelog/changes.jsonl"
SCRUB_ATTEMPTS = 5
"""Rewrites a scrub tries while records keep being appended under it (a busy partner)."""


@dataclass(frozen=True)
class Change:
    id: str
    time: str
    file: str
    op: str
    entry: str | None
    old: str | None
    new: str | None
    reason: str
    source: str


ReadText = Callable[[Path, str], Awaitable[str]]
"""Reads one document of a namespace as text (the memory store's display read)."""


class Changelog:
    """Records of the changes to one namespace's documents, oldest first."""

    def __init__(self, documents: Documents, keep: int) -> None:
        self._documents = documents
        self.keep = keep

    # The changelog takes no document lock: it is written while the changed document's lock
    # is held, and a second lock inside the first could leave every worker's connections
    # waiting on each other. An append is one atomic step; a rewrite (trim, scrub) names the
    # version it read and is refused if a record was appended since.

    async def append(self, root: Path, change: Change) -> None:
        """Record a change (before it is made), dropping the oldest records past ``keep``."""
        line = json.dumps(asdict(change), ensure_ascii=False) + "\n"
        await self._documents.append(root, CHANGELOG, line.encode("utf-8"))
        await self._trim(root)

    async def _trim(self, root: Path) -> None:
        stored = await self._documents.read(root, CHANGELOG)
        lines = stored.data.decode("utf-8", errors="replace").splitlines()
        # a tenth of slack: the log is rewritten once per keep/10 changes, not on each
        if len(lines) > self.keep + self.keep // 10:
            kept = "\n".join(lines[-self.keep :]) + "\n"
            with suppress(DocumentConflict):  # appended meanwhile: that append trims
                await self._documents.write(root, CHANGELOG, kept.encode("utf-8"), stored.version)

    async def records(self, root: Path) -> list[Change]:
        stored = await self._documents.read(root, CHANGELOG)
        records = []
        for line in stored.data.decode("utf-8", errors="replace").splitlines():
            try:
                records.append(Change(**json.loads(line)))
            except (ValueError, TypeError):
                continue
        return records

    async def scrub(
        self,
        root: Path,
        file_name: str,
        read_text: ReadText,
        *,
        entry_ids: set[str],
        texts: set[str],
        whole_file: bool = False,
        gone_from: set[str] | None = None,
        quotes_in: set[str] | None = None,
    ) -> int:
        """Replace records that hold forgotten text with text-less tombstones.

        A record holds it if it changed ``file_name`` (any record with ``whole_file``, else
        one of ``entry_ids``), if its texts or reason quote one of ``texts`` (only records of
        the ``quotes_in`` files, if given), or if it added a block or line to one of the
        ``gone_from`` files (journals) that is no longer there."""
        needles = [comparable(t) for t in texts if t.strip()]
        present = {name: comparable(await read_text(root, name)) for name in gone_from or ()}

        def holds(record: dict[str, Any]) -> bool:
            if record.get("file") == file_name and (whole_file or record.get("entry") in entry_ids):
                return True
            body = "\n".join(str(record.get(key) or "") for key in ("old", "new", "reason"))
            counts = quotes_in is None or record.get("file") in quotes_in
            if counts and quotes(body, needles):
                return True
            added = record.get("new")
            return (
                record.get("file") in present
                and record.get("op") in ("append", "insert")
                and isinstance(added, str)
                and comparable(added) not in present[record["file"]]
            )

        for _ in range(SCRUB_ATTEMPTS):
            stored = await self._documents.read(root, CHANGELOG)
            out, count = [], 0
            for line in stored.data.decode("utf-8").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    out.append(line)
                    continue
                if isinstance(record, dict) and record.get("op") != "forgotten" and holds(record):
                    record.update(op="forgotten", old=None, new=None, reason="forgotten")
                    count += 1
                out.append(json.dumps(record, ensure_ascii=False))
            if not count:
                return 0
            text = "\n".join(out) + "\n"
            try:
                await self._documents.write(root, CHANGELOG, text.encode("utf-8"), stored.version)
            except DocumentConflict:
                continue  # a record was appended meanwhile: scrub the log as it is now
            return count
        raise DocumentConflict(CHANGELOG, await self._documents.read(root, CHANGELOG))
