"""What a partner keeps about one user, as that user sees, corrects, deletes and exports it.

A user's part is their per-user file, their messages (and the partner's replies in their DMs),
and the journal passages written from their conversations. Forgetting removes the text from
all of those and from the changelog records, leaving only a tombstone — a hash of the text, so
a later review never writes the same fact back, and ``/admin undo`` has nothing to restore.
"""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.store import MediaRow, Store
from partners.memory import Entry, MemoryFile, MemoryStore, read_text, text_hash
from partners.persona import Partner
from partners.tools import user_memory_file

KEPT_AUDIO = "audio"
"""Where ``speech.keep_audio`` keeps voice notes in a partner's directory (bot/media.py)."""
JOURNAL_ROLES = ("journal",)
MESSAGE_ROLES = ("user", "assistant", "notice", "context", "journal", "reaction")


@dataclass(frozen=True)
class ForgetReport:
    entries: int = 0
    journal_passages: int = 0
    messages: int = 0


def user_marker(user_key: str) -> str:
    """How a journal heading names whose conversation an entry came from (see review)."""
    return f"({user_key})"


class UserMemory:
    def __init__(self, store: Store, memory: MemoryStore) -> None:
        self.store = store
        self.memory = memory

    def file(self, partner: Partner, user_key: str) -> MemoryFile:
        return user_memory_file(partner, user_key)

    async def entries(self, partner: Partner, user_key: str) -> list[Entry]:
        return await self.memory.entries(self.file(partner, user_key))

    async def forget_entry(self, partner: Partner, user_key: str, entry_id: str) -> Entry | None:
        """Remove one entry everywhere its text is kept; None if the user has no such entry."""
        file = self.file(partner, user_key)
        if not any(e.id == entry_id for e in await self.memory.entries(file)):
            return None
        entry = await self.memory.forget_entry(file, entry_id, source=f"/forget by {user_key}")
        await self._scrub(partner, user_key, file, {entry.text}, {entry_id})
        await self.memory.scrub_journals(partner.dir, texts={entry.text}, heading_marker=None)
        return entry

    async def forget_all(self, partner: Partner, user_key: str) -> ForgetReport:
        """Every entry, every journal passage from their conversations."""
        file = self.file(partner, user_key)
        entries = await self.memory.entries(file)
        await self.memory.clear_file(file, source=f"/forget all by {user_key}")
        texts = {e.text for e in entries}
        await self._scrub(partner, user_key, file, texts, {e.id for e in entries if e.id})
        passages = await self.memory.scrub_journals(
            partner.dir, texts=texts, heading_marker=user_marker(user_key)
        )
        journal_rows = await self.store.forget_user_messages(partner.id, user_key, JOURNAL_ROLES)
        return ForgetReport(len(entries), max(passages, journal_rows), 0)

    async def forget_history(self, partner: Partner, user_key: str) -> int:
        """Their messages and the partner's replies to them, from history and the index, with
        their voice notes' transcripts and image references (and the audio, if kept)."""
        ids = [m.id for m in await self.store.user_messages(partner.id, user_key)]
        count = await self.store.forget_user_messages(partner.id, user_key, MESSAGE_ROLES)
        await self.store.forget_session_prompts(partner.id, user_key)
        await asyncio.to_thread(forget_kept_audio, partner.dir / KEPT_AUDIO, ids)
        return count

    async def _scrub(
        self, partner: Partner, user_key: str, file: MemoryFile, texts: set[str], ids: set[str]
    ) -> None:
        await self.memory.scrub_changelog(partner.dir, file.name, entry_ids=ids, texts=texts)
        await self.store.add_tombstones(partner.id, user_key, {text_hash(t) for t in texts})
        await self.store.forget_session_prompts(partner.id, user_key)

    async def export(self, partner: Partner, user_key: str) -> tuple[str, bytes]:
        """A zip with everything stored about the user: export.json and summary.md."""
        entries = await self.entries(partner, user_key)
        messages = await self.store.user_messages(partner.id, user_key)
        media = await self.store.media_for([m.id for m in messages])
        journal = journal_passages(partner, user_key)
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
        }
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("export.json", json.dumps(data, ensure_ascii=False, indent=2))
            archive.writestr("summary.md", summary_markdown(data))
        stamp = datetime.now(UTC).strftime("%Y%m%d")
        return f"{partner.id}-{stamp}-my-data.zip", buffer.getvalue()


def forget_kept_audio(folder: Path, message_ids: list[int]) -> None:
    """Remove the voice notes ``speech.keep_audio`` kept for these messages."""
    if not folder.is_dir():
        return
    wanted = {str(i) for i in message_ids}
    for path in folder.iterdir():
        if path.stem in wanted:
            path.unlink(missing_ok=True)


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


def journal_passages(partner: Partner, user_key: str) -> list[tuple[str, str]]:
    """(date, passage) for every journal entry written from this user's conversations."""
    found: list[tuple[str, str]] = []
    marker = user_marker(user_key)
    journal_dir = partner.dir / "memory"
    if not journal_dir.is_dir():
        return found
    for path in sorted(journal_dir.glob("*.md")):
        for block in read_text(path).split("\n## ")[1:]:
            heading = block.split("\n", 1)[0]
            if marker in heading:
                found.append((path.stem, "## " + block.strip()))
    return found


def summary_markdown(data: dict[str, Any]) -> str:
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
    lines += [f"### {j['date']}\n{j['text']}" for j in data["journal"]] or ["none"]
    lines += ["", f"## Messages ({len(data['messages'])} in export.json)"]
    return "\n".join(lines) + "\n"
