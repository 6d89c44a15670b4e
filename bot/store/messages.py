"""Messages: recording them (deduplicated by platform message id, indexed for search in the
same statement), platform update ids seen, and reading history back."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from bot.store.rows import MessageRow, NewMessage
from bot.store.search import SearchIndex
from bot.store.searchable import SEARCHABLE_ROLES, THREAD_ROLES, audience_token

MESSAGE_COLUMNS = (
    "id, session_id, partner_id, chat_key, platform_message_id, user_key, speaker, role, text, "
    "audience, status, created_at"
)
RECENT_REACTIONS = (
    "WHERE chat_key = ? AND partner_id IS ? AND role = 'reaction' AND id > ?"
    " ORDER BY id DESC LIMIT ?"
)
"""Users' reactions to a partner's messages in a chat after an id, newest first."""
REVIEWABLE = (
    "WHERE session_id = ? AND role IN ('user', 'assistant') AND id > ? AND status != 'pending'"
    " AND id < coalesce((SELECT min(w.id) FROM messages w JOIN sessions s"
    "  ON w.chat_key = s.chat_key WHERE s.id = ? AND w.status = 'pending'), 1 << 62)"
    " ORDER BY id"
)
"""A session's conversation after an id, up to its chat's first message still pending."""


class Messages(SearchIndex):
    """Recording messages and reading them back."""

    async def update_seen(self, platform: str, update_id: str) -> bool:
        """Whether :meth:`seen_update` recorded this platform update id (read only)."""
        row = await self._sqlite_one(
            "SELECT 1 FROM seen_updates WHERE platform = ? AND update_id = ?",
            (platform, update_id),
        )
        return row is not None

    async def seen_update(self, platform: str, update_id: str) -> bool:
        """Record a platform update id; True if it was recorded before (a duplicate)."""
        cursor = await self._sqlite_write(
            "INSERT OR IGNORE INTO seen_updates (platform, update_id, seen_at) VALUES (?, ?, ?)",
            (platform, update_id, time.time()),
        )
        return cursor.rowcount == 0

    async def reject_update(self, platform: str, update_id: str) -> None:
        """Record a platform update the gateway could not read: skipped like a handled one
        if it comes again, and listed by :meth:`rejected_updates`."""
        await self._sqlite_write(
            "INSERT OR IGNORE INTO seen_updates (platform, update_id, seen_at, status)"
            " VALUES (?, ?, ?, 'rejected')",
            (platform, update_id, time.time()),
        )

    async def rejected_updates(self, platform: str) -> list[str]:
        """Ids of the updates recorded by :meth:`reject_update`, oldest first."""
        rows = await self._sqlite_all(
            "SELECT update_id FROM seen_updates WHERE platform = ? AND status = 'rejected'"
            " ORDER BY seen_at, rowid",
            (platform,),
        )
        return [str(row[0]) for row in rows]

    async def add_message(self, message: NewMessage) -> int | None:
        """Record a message and index it; None if its dedup key was recorded before.

        One statement (a trigger fills the index), so one trip to the database thread."""
        async with self._write_lock:
            message_id = await self._db.run(lambda db: self._insert_message(db, message))
        self._stored([message])
        return message_id

    async def add_message_with_media(self, message: NewMessage) -> int | None:
        """:meth:`add_message` for a message with media: both in one transaction."""
        message_id = await self._in_one_trip(lambda db: self._insert_message(db, message))
        self._stored([message])
        return message_id

    async def add_messages(self, messages: Sequence[NewMessage]) -> list[int | None]:
        message_ids = await self._in_one_trip(
            lambda db: [self._insert_message(db, message) for message in messages]
        )
        self._stored(messages)
        return message_ids

    def _insert_message(self, db: sqlite3.Connection, m: NewMessage) -> int | None:
        """Record one message (and its media) on the database thread; the caller decides
        whether that is inside a transaction."""
        searchable = m.role in SEARCHABLE_ROLES and m.partner_id
        threaded = searchable and m.role in THREAD_ROLES
        scope = audience_token(m.partner_id, m.audience) if m.partner_id and searchable else None
        # the terms of the message before this one in its thread are its "before" context;
        # the insert trigger makes this one that message's "after"
        cursor = db.execute(
            "INSERT OR IGNORE INTO messages (dedup_key, queue_key, session_id, partner_id,"
            " chat_key, platform_message_id, user_key, speaker, role, text, audience, status,"
            " created_at, answers_upto, terms, scope, before_terms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN ("
            "  SELECT terms FROM messages WHERE chat_key = ? AND partner_id = ? AND audience = ?"
            f" AND terms IS NOT NULL AND role IN {THREAD_ROLES} ORDER BY id DESC LIMIT 1"
            " ) END)",
            (
                m.dedup_key,
                m.queue_key,
                m.session_id,
                m.partner_id,
                m.chat_key,
                m.platform_message_id,
                m.user_key,
                m.speaker,
                m.role,
                m.text,
                m.audience,
                m.status,
                m.created_at if m.created_at is not None else time.time(),
                m.answers_upto,
                self._terms(m.text, m.partner_id, scope) if scope else None,
                scope,
                bool(threaded),
                m.chat_key,
                m.partner_id,
                m.audience,
            ),
        )
        if cursor.rowcount == 0:
            return None
        message_id = cursor.lastrowid
        assert message_id is not None
        if m.media:
            db.executemany(
                "INSERT OR IGNORE INTO media (message_id, kind, ref, mime, seconds, bytes,"
                " filename) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (message_id, x.kind, x.ref, x.mime, x.seconds, x.bytes, x.filename)
                    for x in m.media
                ],
            )
        return message_id

    async def message(self, message_id: int) -> MessageRow | None:
        rows = await self._messages("WHERE id = ?", (message_id,))
        return rows[0] if rows else None

    async def session_messages(
        self, session_id: str, roles: Sequence[str] = ("user", "assistant"), after_id: int = 0
    ) -> list[MessageRow]:
        marks = ", ".join("?" for _ in roles)
        return await self._messages(
            f"WHERE session_id = ? AND role IN ({marks}) AND id > ? AND status != 'pending'"
            " ORDER BY id",
            (session_id, *roles, after_id),
        )

    async def reviewable_messages(self, session_id: str, after_id: int) -> list[MessageRow]:
        """The session's conversation after ``after_id`` up to its chat's first message still
        waiting for its turn (see :class:`bot.store.protocol.messages.MessagesStore`); one
        statement, so the rows and the wait are read at one moment."""
        return await self._messages(REVIEWABLE, (session_id, after_id, session_id))

    async def recent_context(self, chat_key: str, after_id: int, limit: int) -> list[MessageRow]:
        """Unaddressed group chatter since ``after_id``, oldest first, at most ``limit``."""
        rows = await self._messages(
            "WHERE chat_key = ? AND role = 'context' AND id > ? ORDER BY id DESC LIMIT ?",
            (chat_key, after_id, limit),
        )
        return rows[::-1]

    async def recent_reactions(
        self, chat_key: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[MessageRow]:
        """Users' reactions to a partner's messages since ``after_id``, oldest first."""
        rows = await self._messages(RECENT_REACTIONS, (chat_key, partner_id, after_id, limit))
        return rows[::-1]

    async def last_inbound_at(self, chat_key: str) -> float | None:
        """When the newest stored inbound message of a chat was written (platform time)."""
        row = await self._sqlite_one(
            "SELECT created_at FROM messages WHERE chat_key = ? AND role IN ('user', 'context')"
            " ORDER BY id DESC LIMIT 1",
            (chat_key,),
        )
        return float(row[0]) if row is not None else None

    async def set_message_text(
        self, message_id: int, text: str, media: tuple[str, str, str] | None = None
    ) -> None:
        """Replace a message's text (a transcript, a photo's description), index included;
        ``media`` (kind, ref, state) is the state of the medium it came from, set with it.
        The update trigger re-indexes the row; its neighbours' context columns are rewritten."""
        async with self._transaction():
            if media is not None:
                await self._db.execute(
                    "UPDATE media SET state = ? WHERE message_id = ? AND kind = ? AND ref = ?",
                    (media[2], message_id, media[0], media[1]),
                )
            rows = await self._db.execute_fetchall(
                "SELECT partner_id, role, audience FROM messages WHERE id = ?", (message_id,)
            )
            if not rows:
                return
            partner_id, role, audience = rows[0]
            searchable = role in SEARCHABLE_ROLES and partner_id
            scope = audience_token(partner_id, audience) if searchable else None
            terms = self._terms(text, partner_id, scope) if scope else None
            await self._db.execute(
                "UPDATE messages SET text = ?, terms = ?, scope = ? WHERE id = ?",
                (text, terms, scope, message_id),
            )
            await self._rewrite_neighbours(await self._threads("id = ?", (message_id,)))
        if scope:
            self._new_searchable.set()  # embedded again (embedding_redo)

    async def partner_messages(self, partner_id: str) -> list[MessageRow]:
        """Every recorded message of a partner, session by session (for an export)."""
        return await self._messages(
            "WHERE partner_id = ? AND status != 'pending' ORDER BY session_id, id", (partner_id,)
        )

    async def reply_counts(self, since: float) -> dict[str, int]:
        """Replies recorded since a time: 'assistant' answers and 'notice' apologies."""
        rows = await self._sqlite_all(
            "SELECT role, COUNT(*) FROM messages WHERE created_at >= ?"
            " AND role IN ('assistant', 'notice') GROUP BY role",
            (since,),
        )
        return {row[0]: int(row[1]) for row in rows}

    async def _messages(self, where: str, params: Sequence[Any]) -> list[MessageRow]:
        return [
            MessageRow(*row)
            for row in await self._sqlite_all(
                f"SELECT {MESSAGE_COLUMNS} FROM messages {where}", params
            )
        ]
