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

from partners.memory import MemoryFile, read_text
from partners.persona import Partner

MAX_SUMMARY_CHARS = 80
CHAT_MARKER = "<!-- chat:{key} -->"
HEADING = re.compile(r"^## ", re.M)
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


def journal_file(partner: Partner, day: str) -> MemoryFile:
    return MemoryFile(partner.dir, f"memory/{day}.md")


def day_header(day: str) -> str:
    return f"# {day}"


def render(entry: JournalEntry, when: datetime, chat_title: str, chat_key: str, who: str) -> str:
    with_whom = f" · with {who}" if who else ""
    heading = f"## {when:%H:%M} · {chat_title}{with_whom} {CHAT_MARKER.format(key=chat_key)}"
    return f"{heading}\n{entry.as_text()}\n"


def summaries_for_chat(partner: Partner, day: str, chat_key: str, last: int = 12) -> str:
    """Today's journal of one chat as its summary lines, newest ``last`` of them: enough for a
    review not to repeat itself, and it never sees other chats' entries."""
    text = read_text(journal_file(partner, day).path)
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
