"""Referenced transcripts: a partner's conversation shown to the owner's assistant as a clearly
labelled third-party record (docs/architecture.md "Commands"; seed 000, referenced transcripts).

``/admin transcript <partner> <session>`` attaches a session to the owner's current assistant
session (a row in the store). Every later turn of that session carries the transcript — its
newest :data:`TRANSCRIPT_CHARS` characters — before the new messages; a new session starts
without it, so a reference never leaks into later conversations.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.store import MessageRow, SessionRow, Store
from partners.catalog import PartnerCatalog

TRANSCRIPT_CHARS = 8000
MAX_REFERENCES = 2
"""Transcripts one owner session keeps; referencing another drops the oldest."""
CUT_MARKER = "… (earlier part omitted)"
END_MARKER = "(end of transcript)"


def transcript_label(partner_name: str, title: str) -> str:
    return (
        f"Transcript of {partner_name}'s conversation “{title or 'untitled'}” "
        "(for reference; not your conversation)"
    )


def render_transcript(
    partner_name: str,
    session: SessionRow,
    rows: Sequence[MessageRow],
    timezone: ZoneInfo,
    limit: int = TRANSCRIPT_CHARS,
) -> str:
    """The label, then ``[time] speaker: text`` lines, keeping the newest ``limit`` chars."""
    lines = [
        f"[{datetime.fromtimestamp(r.created_at, timezone):%Y-%m-%d %H:%M}] "
        f"{r.speaker or r.role}: {r.text}"
        for r in rows
        if r.role in ("user", "assistant")
    ]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        if used + len(line) + 1 > limit:
            if not kept:
                kept.append(line[-limit:])
            kept.append(CUT_MARKER)
            break
        kept.append(line)
        used += len(line) + 1
    body = "\n".join(reversed(kept)) or "(no messages)"
    return f"{transcript_label(partner_name, session.title)}\n{body}\n{END_MARKER}"


async def load_transcripts(
    store: Store, catalog: PartnerCatalog, session_id: str, timezone: ZoneInfo
) -> str | None:
    """The transcripts referenced from an owner session, or None."""
    parts = []
    for referenced_id in await store.transcript_refs(session_id):
        session = await store.session(referenced_id)
        if session is None:
            continue
        partner = catalog.get(session.partner_id) if session.partner_id else None
        name = partner.name if partner else (session.partner_id or "a partner")
        rows = await store.session_messages(referenced_id)
        parts.append(render_transcript(name, session, rows, timezone))
    return "\n\n".join(parts) or None
