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


def entries_for_chat(partner: Partner, day: str, chat_key: str) -> str:
    """Today's journal entries of one chat (a review never sees other chats' entries)."""
    text = read_text(journal_file(partner, day).path)
    marker = CHAT_MARKER.format(key=chat_key)
    blocks = [b for b in HEADING.split(text)[1:] if marker in b.split("\n", 1)[0]]
    return "\n".join("## " + b.replace(marker, "").rstrip() for b in blocks)
