"""What a user owns and may take back: tombstones, their messages and sessions, reminders, and
``/forget`` as a recorded operation whose steps a restart finishes (docs/architecture.md
"Forgetting is an operation, not a loop"), written once for both backends. Every deletion of
messages also rewrites the neighbours' context columns, so no copy of forgotten words stays in
the index; how a deletion runs and what erasing the deleted text takes differ (SQLite here,
PostgreSQL in :mod:`bot.store.postgres.forgetting`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, cast

from bot.store.admin_rows import ReminderRow
from bot.store.connection import SqliteBase
from bot.store.messages import Messages
from bot.store.queue import marks
from bot.store.rows import ForgetOperation, MessageRow
from bot.store.sessions import Sessions

ADD_TOMBSTONE = (
    "INSERT INTO tombstones (partner_id, user_key, text_hash, created_at)"
    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


class Forgetting(Messages, Sessions):
    """Tombstones, a user's rows, and forget operations."""

    async def add_tombstones(self, partner_id: str, user_key: str, hashes: Iterable[str]) -> None:
        now = time.time()
        await self._write_many(ADD_TOMBSTONE, [(partner_id, user_key, h, now) for h in hashes])

    async def tombstones(self, partner_id: str, user_key: str) -> set[str]:
        rows = await self._all(
            "SELECT text_hash FROM tombstones WHERE partner_id = ? AND user_key = ?",
            partner_id,
            user_key,
        )
        return {row[0] for row in rows}

    async def partner_tombstones(self, partner_id: str) -> dict[str, set[str]]:
        """Every tombstone of a partner ("" for the owner's memory), hashes by key."""
        rows = await self._all(
            "SELECT user_key, text_hash FROM tombstones WHERE partner_id = ?", partner_id
        )
        found: dict[str, set[str]] = {}
        for key, text_hash in rows:
            found.setdefault(key, set()).add(text_hash)
        return found

    async def user_messages(self, partner_id: str, user_key: str) -> list[MessageRow]:
        """A user's messages with a partner and the partner's replies in their DMs."""
        return await self._messages(
            "WHERE partner_id = ? AND (user_key = ? OR audience = ?) ORDER BY id",
            partner_id,
            user_key,
            f"user:{user_key}",
        )

    async def user_message_ids(
        self, partner_id: str, user_key: str, roles: Sequence[str]
    ) -> list[int]:
        """A user's finished messages (of these roles) with a partner, their DM replies too."""
        rows = await self._all(
            "SELECT id FROM messages WHERE partner_id = ? AND (user_key = ? OR audience = ?)"
            f" AND role IN ({marks(roles)}) AND status != 'pending' ORDER BY id",
            partner_id,
            user_key,
            f"user:{user_key}",
            *roles,
        )
        return [row[0] for row in rows]

    async def journal_messages(self, partner_id: str) -> list[MessageRow]:
        """Every journal entry of a partner as search indexes it."""
        return await self._messages(
            "WHERE partner_id = ? AND role = 'journal' ORDER BY id", partner_id
        )

    async def forget_session_prompts(self, partner_id: str, user_key: str) -> None:
        """Frozen prompts hold the user's memory as it was: end those sessions and drop it."""
        await self._write(
            "UPDATE sessions SET system_prompt = '', ended_at = coalesce(ended_at, ?),"
            " end_reason = coalesce(end_reason, 'forgotten') WHERE partner_id = ? AND user_key = ?",
            time.time(),
            partner_id,
            user_key,
        )

    async def sessions_titled_by(self, partner_id: str, user_key: str) -> list[str]:
        """A user's DM sessions with a partner, and group sessions opened by their message:
        a session's title is its first message."""
        rows = await self._all(
            "SELECT id FROM sessions WHERE partner_id = ?1 AND user_key = ?2 UNION"
            " SELECT m.session_id FROM messages m WHERE m.partner_id = ?1 AND m.user_key = ?2"
            " AND m.role = 'user' AND m.session_id IS NOT NULL AND m.id = (SELECT min(f.id)"
            " FROM messages f WHERE f.session_id = m.session_id AND f.role = 'user')",
            partner_id,
            user_key,
        )
        return [row[0] for row in rows]

    async def clear_session_titles(self, session_ids: Sequence[str]) -> None:
        await self._write_many(
            "UPDATE sessions SET title = '' WHERE id = ?", [(s,) for s in session_ids]
        )

    async def user_reminders(self, partner_id: str, user_key: str) -> list[ReminderRow]:
        rows = await self._all(
            "SELECT * FROM reminders WHERE partner_id = ? AND user_key = ? ORDER BY id",
            partner_id,
            user_key,
        )
        return [cast(ReminderRow, dict(row)) for row in rows]

    async def delete_reminders(self, reminder_ids: Sequence[int]) -> None:
        await self._write_many("DELETE FROM reminders WHERE id = ?", [(r,) for r in reminder_ids])

    async def begin_forget(self, operation: ForgetOperation) -> ForgetOperation:
        """Record a forget operation and its tombstones, in one transaction, before anything
        is removed (a ``request`` is recorded once: look it up first)."""
        now = time.time()
        async with self._transaction() as tx:
            operation_id = await tx.value(
                "INSERT INTO forget_operations (request, partner_id, user_key, kind, entry_ids,"
                " hashes, texts, session_ids, entries, passages, messages, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                operation.request,
                operation.partner_id,
                operation.user_key,
                operation.kind,
                json.dumps(operation.entry_ids),
                json.dumps(operation.hashes),
                json.dumps(operation.texts, ensure_ascii=False),
                json.dumps(operation.session_ids),
                operation.entries,
                operation.passages,
                operation.messages,
                now,
            )
            await tx.write_many(
                ADD_TOMBSTONE,
                [(operation.partner_id, operation.user_key, h, now) for h in operation.hashes],
            )
        assert operation_id is not None
        return replace(operation, id=int(operation_id))

    async def forget_operation(self, request: str) -> ForgetOperation | None:
        rows = await self._forget_operations("WHERE request = ?", request)
        return rows[0] if rows else None

    async def unfinished_forgets(
        self, partner_id: str | None = None, user_key: str | None = None
    ) -> list[ForgetOperation]:
        """Operations a crash or a failed step left behind, oldest first."""
        if partner_id is not None and user_key is not None:
            return await self._forget_operations(
                "WHERE status != 'done' AND partner_id = ? AND user_key = ? ORDER BY id",
                partner_id,
                user_key,
            )
        return await self._forget_operations("WHERE status != 'done' ORDER BY id")

    async def forget_scrubbed(self, operation_id: int) -> None:
        """Every copy is gone: the operation keeps no text of its own any more."""
        await self._write(
            "UPDATE forget_operations SET status = 'scrubbed', texts = NULL WHERE id = ?",
            operation_id,
        )

    async def forget_done(self, operation_id: int) -> None:
        await self._write(
            "UPDATE forget_operations SET status = 'done', texts = NULL, finished_at = ?"
            " WHERE id = ?",
            time.time(),
            operation_id,
        )

    async def _forget_operations(self, where: str, *args: Any) -> list[ForgetOperation]:
        rows = await self._all(
            "SELECT id, request, partner_id, user_key, kind, entry_ids, hashes, texts,"
            f" session_ids, entries, passages, messages, status FROM forget_operations {where}",
            *args,
        )
        return [
            ForgetOperation(
                id=row["id"],
                request=row["request"],
                partner_id=row["partner_id"],
                user_key=row["user_key"],
                kind=row["kind"],
                entry_ids=tuple(json.loads(row["entry_ids"])),
                hashes=tuple(json.loads(row["hashes"])),
                texts=tuple(json.loads(row["texts"] or "[]")),
                session_ids=tuple(json.loads(row["session_ids"])),
                entries=row["entries"],
                passages=row["passages"],
                messages=row["messages"],
                status=row["status"],
            )
            for row in rows
        ]


class SqliteForgetting(Forgetting, SqliteBase):
    """Deleting messages and erasing what they left, on SQLite."""

    async def delete_messages(self, message_ids: Sequence[int]) -> int:
        """The one way a message leaves the store: the row, (by the delete trigger) its search
        index entry, and the copies of its words in its neighbours' context columns. Returns
        how many were still there."""
        deleted = 0
        async with self._transaction() as tx:
            threads: set[tuple[str, str, str]] = set()
            for message_id in message_ids:
                threads.update(await self._threads(tx, "id = ?", message_id))
                deleted += await tx.write("DELETE FROM messages WHERE id = ?", message_id)
            await self._rewrite_neighbours(tx, sorted(threads))
        return deleted

    async def erase_deleted_text(self) -> bool:
        """After forgetting: rebuild the search index's segments without the deleted rows'
        terms (an FTS5 delete only adds a marker; the terms stay in the old segments until a
        merge) and checkpoint the WAL into the database, truncating it, so no older page
        image keeps the text either. False if a reader kept the checkpoint from finishing."""
        async with self._write_lock:
            await self._db.execute("INSERT INTO message_index (message_index) VALUES ('optimize')")
            rows = await self._db.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
        return bool(rows) and rows[0][0] == 0
