"""What a user owns and may take back, on PostgreSQL (see :mod:`bot.store.forgetting`, whose
SQLite twin this is): tombstones, their messages and sessions, reminders, and ``/forget`` as a
recorded operation whose steps a restart finishes. Every deletion of messages also rewrites
the neighbours' context columns, so no copy of forgotten words stays in the index.

What "no copy left" means on PostgreSQL, which has no ``secure_delete``: a DELETE or UPDATE
leaves the old row version in its page until VACUUM removes it, so :meth:`erase_deleted_text`
vacuums every table forgetting touches, then rebuilds the search index (a GIN index keeps a
term as a key after VACUUM emptied its postings; the new index is built beside the old one,
so writes go on meanwhile, at the cost of reading every indexed message once per forget).
After that no query, dump or copy of the database made afterwards holds the words, nor do the
search index's files. It does not reach: bytes of a removed row version inside a table page
that has not been written again (VACUUM compacts a page but does not zero its free space;
``VACUUM FULL`` rewrites the table, under a lock that stops every worker meanwhile, so it is
the owner's to run), the write-ahead log until the server recycles those segments (after the
next checkpoints), a row version an older transaction of another worker still sees (the next
VACUUM takes it), and copies outside this server — replicas, WAL archives, pg_dump files
(docs/forgetting.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, cast

from bot.store.admin_rows import ReminderRow
from bot.store.postgres.base import PostgresBase
from bot.store.postgres.messages import PostgresMessages
from bot.store.rows import ForgetOperation, MessageRow
from bot.store.sessions import Sessions

MAINTENANCE_TIMEOUT_SECONDS = 3600.0
"""VACUUM and the rebuilt search index after forgetting take as long as the tables are big:
they are not held to the pool's statement timeout (they block no turn)."""
FORGETTING_TABLES = (
    "messages", "media", "message_vectors", "sessions", "reminders", "forget_operations",
    "deliveries",
)  # fmt: skip
"""The tables whose rows forgetting deletes or rewrites: what erase_deleted_text vacuums."""
ADD_TOMBSTONE = (
    "INSERT INTO tombstones (partner_id, user_key, text_hash, created_at)"
    " VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
)


class Forgetting(PostgresMessages, Sessions, PostgresBase):
    """Tombstones, a user's rows, and forget operations."""

    async def add_tombstones(self, partner_id: str, user_key: str, hashes: Iterable[str]) -> None:
        now = time.time()
        async with self._transaction() as tx:
            await tx.write_many(ADD_TOMBSTONE, [(partner_id, user_key, h, now) for h in hashes])

    async def tombstones(self, partner_id: str, user_key: str) -> set[str]:
        rows = await self._all(
            "SELECT text_hash FROM tombstones WHERE partner_id = $1 AND user_key = $2",
            partner_id,
            user_key,
        )
        return {row[0] for row in rows}

    async def partner_tombstones(self, partner_id: str) -> dict[str, set[str]]:
        """Every tombstone of a partner ("" for the owner's memory), hashes by key."""
        rows = await self._all(
            "SELECT user_key, text_hash FROM tombstones WHERE partner_id = $1", partner_id
        )
        found: dict[str, set[str]] = {}
        for key, text_hash in rows:
            found.setdefault(key, set()).add(text_hash)
        return found

    async def user_messages(self, partner_id: str, user_key: str) -> list[MessageRow]:
        """A user's messages with a partner and the partner's replies in their DMs."""
        return await self._messages(
            "WHERE partner_id = $1 AND (user_key = $2 OR audience = $3) ORDER BY id",
            partner_id,
            user_key,
            f"user:{user_key}",
        )

    async def user_message_ids(
        self, partner_id: str, user_key: str, roles: Sequence[str]
    ) -> list[int]:
        """A user's finished messages (of these roles) with a partner, their DM replies too."""
        rows = await self._all(
            "SELECT id FROM messages WHERE partner_id = $1 AND (user_key = $2 OR audience = $3)"
            " AND role = ANY($4::text[]) AND status != 'pending' ORDER BY id",
            partner_id,
            user_key,
            f"user:{user_key}",
            list(roles),
        )
        return [row[0] for row in rows]

    async def journal_messages(self, partner_id: str) -> list[MessageRow]:
        """Every journal entry of a partner as search indexes it."""
        return await self._messages(
            "WHERE partner_id = $1 AND role = 'journal' ORDER BY id", partner_id
        )

    async def delete_messages(self, message_ids: Sequence[int]) -> int:
        """The one way a message leaves the store: the row, (by triggers) its media and
        vector, and the copies of its words in its neighbours' context columns. Returns how
        many were still there."""
        ids = list(message_ids)
        async with self._transaction() as tx:
            threads = await self._threads(tx, "id = ANY($1::bigint[])", ids)
            deleted = await tx.write("DELETE FROM messages WHERE id = ANY($1::bigint[])", ids)
            await self._rewrite_neighbours(tx, sorted(threads))
        return deleted

    async def forget_session_prompts(self, partner_id: str, user_key: str) -> None:
        """Frozen prompts hold the user's memory as it was: end those sessions and drop it."""
        await self._write(
            "UPDATE sessions SET system_prompt = '', ended_at = coalesce(ended_at, $1),"
            " end_reason = coalesce(end_reason, 'forgotten')"
            " WHERE partner_id = $2 AND user_key = $3",
            time.time(),
            partner_id,
            user_key,
        )

    async def sessions_titled_by(self, partner_id: str, user_key: str) -> list[str]:
        """A user's DM sessions with a partner, and group sessions opened by their message:
        a session's title is its first message."""
        rows = await self._all(
            "SELECT id FROM sessions WHERE partner_id = $1 AND user_key = $2 UNION"
            " SELECT m.session_id FROM messages m WHERE m.partner_id = $1 AND m.user_key = $2"
            " AND m.role = 'user' AND m.session_id IS NOT NULL AND m.id = (SELECT min(f.id)"
            " FROM messages f WHERE f.session_id = m.session_id AND f.role = 'user')",
            partner_id,
            user_key,
        )
        return [row[0] for row in rows]

    async def clear_session_titles(self, session_ids: Sequence[str]) -> None:
        await self._write(
            "UPDATE sessions SET title = '' WHERE id = ANY($1::text[])", list(session_ids)
        )

    async def user_reminders(self, partner_id: str, user_key: str) -> list[ReminderRow]:
        rows = await self._all(
            "SELECT * FROM reminders WHERE partner_id = $1 AND user_key = $2 ORDER BY id",
            partner_id,
            user_key,
        )
        return [cast(ReminderRow, dict(row)) for row in rows]

    async def delete_reminders(self, reminder_ids: Sequence[int]) -> None:
        await self._write("DELETE FROM reminders WHERE id = ANY($1::bigint[])", list(reminder_ids))

    async def begin_forget(self, operation: ForgetOperation) -> ForgetOperation:
        """Record a forget operation and its tombstones, in one transaction, before anything
        is removed (a ``request`` is recorded once: look it up first)."""
        now = time.time()
        async with self._transaction() as tx:
            row = await tx.one(
                "INSERT INTO forget_operations (request, partner_id, user_key, kind, entry_ids,"
                " hashes, texts, session_ids, entries, passages, messages, created_at)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
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
        assert row is not None
        return replace(operation, id=int(row[0]))

    async def forget_operation(self, request: str) -> ForgetOperation | None:
        rows = await self._forget_operations("WHERE request = $1", request)
        return rows[0] if rows else None

    async def unfinished_forgets(
        self, partner_id: str | None = None, user_key: str | None = None
    ) -> list[ForgetOperation]:
        """Operations a crash or a failed step left behind, oldest first."""
        if partner_id is not None and user_key is not None:
            return await self._forget_operations(
                "WHERE status != 'done' AND partner_id = $1 AND user_key = $2 ORDER BY id",
                partner_id,
                user_key,
            )
        return await self._forget_operations("WHERE status != 'done' ORDER BY id")

    async def forget_scrubbed(self, operation_id: int) -> None:
        """Every copy is gone: the operation keeps no text of its own any more."""
        await self._write(
            "UPDATE forget_operations SET status = 'scrubbed', texts = NULL WHERE id = $1",
            operation_id,
        )

    async def forget_done(self, operation_id: int) -> None:
        await self._write(
            "UPDATE forget_operations SET status = 'done', texts = NULL, finished_at = $1"
            " WHERE id = $2",
            time.time(),
            operation_id,
        )

    async def erase_deleted_text(self) -> bool:
        """After forgetting: VACUUM the tables forgetting touched, so the deleted and
        rewritten rows' old versions leave their pages and indexes, and rebuild the search
        index (see the module's docstring for what that does not reach). Always True:
        unlike SQLite's checkpoint, nothing tells whether an older transaction kept a
        version alive; the next VACUUM (autovacuum, or the next forget) takes what this one
        could not."""
        await self._write(
            f"VACUUM {', '.join(FORGETTING_TABLES)}", allowed_seconds=MAINTENANCE_TIMEOUT_SECONDS
        )
        # a GIN index keeps a term as a key after VACUUM emptied its posting list: only a
        # new index leaves the term out (built beside the old one, writes go on meanwhile)
        await self._write(
            "REINDEX INDEX CONCURRENTLY messages_search",
            allowed_seconds=MAINTENANCE_TIMEOUT_SECONDS,
        )
        return True

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
