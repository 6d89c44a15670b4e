"""What a partner keeps about one user, as that user sees, corrects, deletes and exports it.

A user's part is their per-user file, their messages (and the partner's replies in their DMs),
and the journal passages written from their conversations. Forgetting (partners/forgetting.py)
removes the text from all of those and every other copy, leaving only a tombstone — a hash of
the text, so a later review never writes the same fact back, and ``/admin undo`` has nothing
to restore.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import UTC, datetime
from typing import Any

from bot.store import ForgetOperation, MediaRow, Store
from partners.forgetting import Forgetting
from partners.journal import heading_user, journal_files
from partners.memory import MemoryFile, MemoryStore
from partners.memory_format import Entry
from partners.persona import Partner
from partners.tools import user_memory_file


class UserMemory:
    def __init__(self, store: Store, memory: MemoryStore, forgetting: Forgetting) -> None:
        self.store = store
        self.memory = memory
        self.forgetting = forgetting

    def file(self, partner: Partner, user_key: str) -> MemoryFile:
        return user_memory_file(partner, user_key)

    async def entries(self, partner: Partner, user_key: str) -> list[Entry]:
        return await self.memory.entries(self.file(partner, user_key))

    async def forget(
        self,
        partner: Partner,
        user_key: str,
        kind: str,
        *,
        entry_id: str | None = None,
        request: str | None = None,
    ) -> ForgetOperation | None:
        """Forget one entry (``entry``), everything remembered (``all``) or the conversation
        (``history``) everywhere it is kept; see partners/forgetting.py."""
        return await self.forgetting.forget(
            partner, user_key, kind, entry_id=entry_id, request=request
        )

    async def export(self, partner: Partner, user_key: str) -> tuple[str, bytes]:
        """A zip with everything stored about the user: export.json and summary.md."""
        entries = await self.entries(partner, user_key)
        messages = await self.store.user_messages(partner.id, user_key)
        media = await self.store.media_for([m.id for m in messages])
        journal = await journal_passages(self.memory, partner, user_key)
        calls = await self.store.user_tool_calls(partner.id, user_key)
        data: dict[str, Any] = {
            "partner": {"id": partner.id, "name": partner.name},
            "user": user_key,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "memory": [
                {
                    "id": e.id,
                    "text": e.text,
                    "saved": e.created.isoformat(timespec="seconds") if e.created else None,
                }
                for e in entries
            ],
            "messages": [
                {
                    "time": datetime.fromtimestamp(m.created_at, UTC).isoformat(timespec="seconds"),
                    "role": m.role,
                    "text": m.text,
                    **media_fields(media.get(m.id, [])),
                }
                for m in messages
                if m.role in ("user", "assistant", "context")
            ],
            "journal": [{"date": day, "text": text} for day, text in journal],
            "tool_calls": [
                {
                    "time": datetime.fromtimestamp(c.created_at, UTC).isoformat(timespec="seconds"),
                    "tool": f"{c.server}.{c.tool}",
                    "arguments": c.arguments,
                    "result": c.result,
                    "failed": c.is_error,
                }
                for c in calls
            ],
        }
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("export.json", json.dumps(data, ensure_ascii=False, indent=2))
            archive.writestr("summary.md", summary_markdown(data))
        stamp = datetime.now(UTC).strftime("%Y%m%d")
        return f"{partner.id}-{stamp}-my-data.zip", buffer.getvalue()


def media_fields(media: list[MediaRow]) -> dict[str, Any]:
    """What an export says of a message's media: spoken (its text is a transcript) and the
    platform ids of the images sent with it (ids, not bytes)."""
    fields: dict[str, Any] = {}
    if any(m.kind == "voice" and m.state == "done" for m in media):
        fields["spoken"] = True
    images = [m.ref for m in media if m.kind == "photo"]
    if images:
        fields["images"] = images
    return fields


async def journal_passages(
    memory: MemoryStore, partner: Partner, user_key: str
) -> list[tuple[str, str]]:
    """(date, passage) for every journal entry written from this user's conversations."""
    found: list[tuple[str, str]] = []
    for file in await journal_files(memory, partner.dir):
        day = file.name.removeprefix("memory/").removesuffix(".md")
        for block in (await memory.read(file)).split("\n## ")[1:]:
            heading = block.split("\n", 1)[0]
            if heading_user(heading) == user_key:
                found.append((day, "## " + block.strip()))
    return found


_CHAT_MARKERS = re.compile(r"[ \t]*<!-- chat:.*?-->")
"""A journal heading's marker of its chat (``partners/journal.py``), and the space before it."""


def summary_markdown(data: dict[str, Any]) -> str:
    """summary.md, for a person to read: the journal passages without the markers that tie
    each to its chat (export.json keeps them, as stored)."""
    lines = [
        f"# What {data['partner']['name']} keeps about you",
        f"Exported {data['exported_at']} for {data['user']}.",
        "",
        "## Remembered facts",
    ]
    lines += [f"- {m['text']} ({m['saved'] or 'written by hand'})" for m in data["memory"]] or [
        "- none"
    ]
    lines += ["", "## Diary passages from your conversations"]
    lines += [f"### {j['date']}\n{_CHAT_MARKERS.sub('', j['text'])}" for j in data["journal"]] or [
        "none"
    ]
    lines += ["", f"## Messages ({len(data['messages'])} in export.json)"]
    lines += ["", f"## Tool calls ({len(data['tool_calls'])} in export.json)"]
    return "\n".join(lines) + "\n"
