"""Daily journals: ``memory/YYYY-MM-DD.md`` in a partner's directory, one per day in the
partner's time zone.

Each review that found something worth keeping appends one entry under a time heading that names
the chat (and, for per-user partners, whose conversation it was). The heading carries a hidden
chat marker so a later review of the same chat sees today's earlier entries — and only those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from partners.entry_text import comparable, quotes
from partners.memory import MemoryFile, MemoryStore
from partners.persona import Partner

MAX_SUMMARY_CHARS = 80
DAY_LINE = "> Day: "
"""Starts the one-line summary of the whole day that the nightly pass puts under the date."""
CHAT_MARKER = "<!-- chat:{key} -->"
HEADING = re.compile(r"^## ", re.M)
HEADING_USER = re.compile(r"\(([^()\s]+)\)\s*<!-- chat:")
SECTION_TITLES = {
    "discussed": "Discussed and resolved",
    "facts": "Key facts",
    "feelings": "Feelings",
}


@dataclass(frozen=True)
class JournalEntry:
    summary: str
    discussed: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    feelings: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.summary.strip()

    def as_text(self) -> str:
        """The entry without its heading: what search indexes."""
        lines = [f"> Summary: {clip(self.summary)}"]
        for key, title in SECTION_TITLES.items():
            items = [i for i in getattr(self, key) if i.strip()]
            if items:
                lines += ["", f"### {title}", *(f"- {' '.join(i.split())}" for i in items)]
        return "\n".join(lines)


def clip(summary: str) -> str:
    text = " ".join(summary.split())
    return text if len(text) <= MAX_SUMMARY_CHARS else text[: MAX_SUMMARY_CHARS - 1] + "…"


def user_marker(user_key: str) -> str:
    """How a journal heading names whose conversation an entry came from (see review)."""
    return f"({user_key})"


def journal_file(partner: Partner, day: str) -> MemoryFile:
    return MemoryFile(partner.dir, f"memory/{day}.md")


def day_header(day: str) -> str:
    return f"# {day}"


def render(entry: JournalEntry, when: datetime, chat_title: str, chat_key: str, who: str) -> str:
    with_whom = f" · with {who}" if who else ""
    heading = f"## {when:%H:%M} · {chat_title}{with_whom} {CHAT_MARKER.format(key=chat_key)}"
    return f"{heading}\n{entry.as_text()}\n"


async def summaries_for_chat(
    memory: MemoryStore, partner: Partner, day: str, chat_key: str, last: int = 12
) -> str:
    """Today's journal of one chat as its summary lines, newest ``last`` of them: enough for a
    review not to repeat itself, and it never sees other chats' entries."""
    text = await memory.read(journal_file(partner, day))
    marker = CHAT_MARKER.format(key=chat_key)
    lines = []
    for block in HEADING.split(text)[1:]:
        heading, _, body = block.partition("\n")
        if marker not in heading:
            continue
        time_part = heading.split(" · ", 1)[0]
        summary = next((ln for ln in body.splitlines() if ln.startswith("> Summary:")), "")
        lines.append(f"{time_part} {summary.removeprefix('> Summary:').strip()}")
    return "\n".join(lines[-last:])


async def journal_files(memory: MemoryStore, root: Path) -> list[MemoryFile]:
    """Every daily journal of the partner whose directory is ``root``, oldest first."""
    names = await memory.documents.names(root, "memory")
    return [MemoryFile(root, name) for name in names if name.endswith(".md")]


def heading_user(heading: str) -> str | None:
    """Whose conversation a journal heading names (see :func:`user_marker`), or None (a group,
    a shared-scope partner). Read next to the chat marker, so a display name that contains
    something like a marker cannot pass for another user."""
    match = HEADING_USER.search(heading)
    return match.group(1) if match else None


def without_forgotten(
    lines: list[str], needles: list[str], *, user_key: str | None, whole_entries: bool
) -> tuple[list[str], int]:
    """A journal's lines without the forgotten text, and how many passages went.

    With ``user_key``, the entries from that user's conversations go entirely if
    ``whole_entries``, and entries from another user's conversations are theirs and stay as
    they are; elsewhere every line quoting a needle (:func:`comparable` text) goes. Without
    ``user_key`` (the owner forgetting an entry) quoting lines go from every entry. Once
    anything went, the day line goes too: it summarised the whole day, that part included."""
    kept: list[str] = []
    removed = 0
    dropping = others = False
    for line in lines:
        if line.startswith("## "):
            whose = heading_user(line) if user_key is not None else None
            mine = user_key is not None and whose == user_key
            others = whose is not None and whose != user_key
            # a heading that quotes the text takes its entry along, or the entry's body
            # would run on under the previous heading
            dropping = (whole_entries and mine) or (not others and quotes(line, needles))
            removed += dropping
        if dropping:
            continue
        if not others and quotes(line, needles):
            removed += 1
            continue
        kept.append(line)
    if not removed:
        return lines, 0
    kept = [line for line in kept if not line.startswith(DAY_LINE)]
    return _single_blank_lines(kept), removed


def _single_blank_lines(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line)
    return out


async def forget_in_journals(
    memory: MemoryStore,
    root: Path,
    *,
    texts: set[str],
    user_key: str | None,
    whole_entries: bool,
    source: str,
) -> int:
    """Remove forgotten text from every journal of a partner (see :func:`without_forgotten`);
    returns the passages removed."""
    needles = [comparable(t) for t in texts if t.strip()]
    removed = 0
    for file in await journal_files(memory, root):

        def keep(lines: list[str]) -> list[str]:
            nonlocal removed
            kept, count = without_forgotten(
                lines, needles, user_key=user_key, whole_entries=whole_entries
            )
            removed += count
            return kept

        await memory.forget_lines(file, keep, source=source)
    return removed


async def count_forgotten_in_journals(
    memory: MemoryStore, root: Path, *, texts: set[str], user_key: str | None, whole_entries: bool
) -> int:
    """The passages :func:`forget_in_journals` would remove, counted without writing. Each
    file is read strictly, so one that could not be rewritten fails here (UnreadableFile),
    before anything is forgotten, and not halfway."""
    needles = [comparable(t) for t in texts if t.strip()]
    removed = 0
    for file in await journal_files(memory, root):
        lines = (await memory.read(file, strict=True)).replace("\r\n", "\n").split("\n")
        removed += without_forgotten(
            lines, needles, user_key=user_key, whole_entries=whole_entries
        )[1]
    return removed
