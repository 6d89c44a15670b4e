"""``/admin export <partner>``: a partner's files and every session as a .tar.gz, sent in the
DM (or kept under the data directory when it is too large to send). On PostgreSQL the files
are the documents the database keeps, written out as the directory they would be."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.admin.args import file_reply, need, services
from bot.commands.types import CommandContext, CommandReply
from bot.store import MessageRow, SessionRow
from partners.persona import PARTNER_FILES, Partner


async def admin_export(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "export <partner>")
    partner = ctx.catalog.require(ctx.args[0])
    sessions = await ctx.store.partner_sessions(partner.id, limit=1_000_000)
    messages = await ctx.store.partner_messages(partner.id)
    lines = _session_lines(sessions, messages)
    files = None if ctx.catalog.rows is None else await _kept_files(ctx, partner)
    data = await asyncio.to_thread(_archive, partner, lines, files)
    filename = f"{partner.id}-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz"
    text = f"Export of {partner.name}: its directory and {len(sessions)} sessions as JSONL"
    reply = file_reply(text, filename, data)
    if reply.attachment is None:
        kept = ctx.config.data_dir / "exports" / filename
        await asyncio.to_thread(_write, kept, data)
        reply = file_reply(text, filename, data, kept_at=str(kept))
    return reply


def _session_lines(sessions: list[SessionRow], messages: list[MessageRow]) -> list[str]:
    by_id = {s.id: s for s in sessions}
    lines = []
    for m in messages:
        session = by_id.get(m.session_id or "")
        record = {
            "session": m.session_id,
            "title": session.title if session else None,
            "chat": m.chat_key,
            "user": m.user_key,
            "role": m.role,
            "speaker": m.speaker,
            "text": m.text,
            "time": datetime.fromtimestamp(m.created_at, UTC).isoformat(),
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    return lines


EXPORTED_FOLDERS = ("", "users", "memory", "changelog")
"""Where a partner's documents are: its own files, per-user memory, journals, changelog."""


async def _kept_files(ctx: CommandContext, partner: Partner) -> dict[str, bytes]:
    """Everything a partner kept as rows of the database, as the files of its directory."""
    documents = services(ctx).memory.documents
    files = {}
    for folder in EXPORTED_FOLDERS:
        for name in await documents.names(partner.dir, folder):
            files[name] = (await documents.read(partner.dir, name)).data
    for name in PARTNER_FILES:
        data = partner.file(name)
        if data is not None:
            files[name] = data
    return files


def _archive(partner: Partner, lines: list[str], files: dict[str, bytes] | None) -> bytes:
    """The partner's directory (or ``files``, what it keeps in the database) and its
    sessions, as a .tar.gz."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        if files is None:
            archive.add(partner.dir, arcname=partner.id)
        for name, data in sorted((files or {}).items()):
            _add(archive, f"{partner.id}/{name}", data)
        body = ("\n".join(lines) + "\n" if lines else "").encode("utf-8")
        _add(archive, f"{partner.id}/sessions.jsonl", body)
    return buffer.getvalue()


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    archive.addfile(info, io.BytesIO(data))


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
