"""Messages: recording them (deduplicated by platform message id, indexed for search in the
same statement), platform update ids seen, and reading history back. One query text for both
backends; SQLite stores a batch of messages its own way (:mod:`bot.store.sqlite_messages`),
PostgreSQL adds waking the other workers once a pending message has
committed (:mod:`bot.store.postgres.messages`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from bot.store.base import StoreBase, Transaction
from bot.store.rows import MessageRow, NewMedia, NewMessage
from bot.store.searchable import SEARCHABLE_ROLES, THREAD_ROLES, SearchableMessages, audience_token

MESSAGE_COLUMNS = (
    "id, session_id, partner_id, chat_key, platform_message_id, user_key, speaker, role, text, "
    "audience, status, created_at"
)
RECENT_REACTIONS = (
    "WHERE chat_key = ?1 AND (partner_id = ?2 OR (partner_id IS NULL AND CAST(?2 AS text) IS NULL))"
    " AND role = 'reaction' AND id > ?3 ORDER BY id DESC LIMIT ?4"
)
"""Users' reactions to a partner's messages in a chat after an id, newest first (a null-safe
equality both dialects read)."""
REVIEWABLE = (
    "WHERE session_id = ?1 AND role IN ('user', 'assistant') AND id > ?2 AND status != 'pending'"
    " AND id < coalesce((SELECT min(w.id) FROM messages w JOIN sessions s"
    "  ON w.chat_key = s.chat_key WHERE s.id = ?1 AND w.status = 'pending'),"
    " 4611686018427387904)"
    " ORDER BY id"
)
"""A session's conversation after an id, up to its chat's first message still pending (or
2**62: no message waits)."""
NO_MESSAGE_YET = 2**62
"""An id above every message's."""
INSERT_INTO_MESSAGES = (
    "INSERT INTO messages (dedup_key, queue_key, session_id, partner_id, chat_key,"
    " platform_message_id, user_key, speaker, role, text, audience, status, created_at,"
    " answers_upto, terms, scope, before_terms)"
)
MESSAGE_VALUES = (
    "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
    " CASE WHEN ?17 THEN ("
    "  SELECT terms FROM messages WHERE chat_key = ?5 AND partner_id = ?4 AND audience = ?11"
    "  AND terms IS NOT NULL AND role IN ("
    + ", ".join(f"'{role}'" for role in THREAD_ROLES)
    + ") ORDER BY id DESC LIMIT 1"
    " ) END"
)
"""One message's values (:meth:`Messages._message_values`) and its "before" context (the terms
of the message before it in its thread), for :data:`INSERT_INTO_MESSAGES`."""
INSERT_MESSAGE = (
    f"{INSERT_INTO_MESSAGES} VALUES ({MESSAGE_VALUES}) ON CONFLICT DO NOTHING RETURNING id"
)
"""One message, its "before" context read in the same statement; the insert trigger makes it
that message's "after"."""
INSERT_MEDIA = (
    "INSERT INTO media (message_id, kind, ref, mime, seconds, bytes, filename)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


def media_values(x: NewMedia) -> tuple[Any, ...]:
    """INSERT_MEDIA's parameters after the message id."""
    return (x.kind, x.ref, x.mime, x.seconds, x.bytes, x.filename)


class Messages(SearchableMessages, StoreBase):
    """Recording messages and reading them back."""

    _INSERTION_ORDER = "rowid"
    """The column that orders rows as they were stored, where no id does (PostgreSQL: an
    identity column ``seq``)."""

    async def update_seen(self, platform: str, update_id: str) -> bool:
        """Whether :meth:`seen_update` recorded this platform update id (read only)."""
        row = await self._one(
            "SELECT 1 FROM seen_updates WHERE platform = ? AND update_id = ?",
            platform,
            update_id,
        )
        return row is not None

    async def seen_update(self, platform: str, update_id: str) -> bool:
        """Record a platform update id; True if it was recorded before (a duplicate)."""
        added = await self._write(
            "INSERT INTO seen_updates (platform, update_id, seen_at) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            platform,
            update_id,
            time.time(),
        )
        return added == 0

    async def reject_update(self, platform: str, update_id: str) -> None:
        """Record a platform update the gateway could not read: skipped like a handled one
        if it comes again, and listed by :meth:`rejected_updates`."""
        await self._write(
            "INSERT INTO seen_updates (platform, update_id, seen_at, status)"
            " VALUES (?, ?, ?, 'rejected') ON CONFLICT DO NOTHING",
            platform,
            update_id,
            time.time(),
        )

    async def rejected_updates(self, platform: str) -> list[str]:
        """Ids of the updates recorded by :meth:`reject_update`, oldest first."""
        rows = await self._all(
            "SELECT update_id FROM seen_updates WHERE platform = ? AND status = 'rejected'"
            f" ORDER BY seen_at, {self._INSERTION_ORDER}",
            platform,
        )
        return [str(row[0]) for row in rows]

    async def add_message(self, message: NewMessage) -> int | None:
        """Record a message and index it; None if its dedup key was recorded before. One
        statement (triggers keep the search columns)."""
        if message.media:
            return await self.add_message_with_media(message)
        row = await self._one(INSERT_MESSAGE, *self._message_values(message))
        self._stored([message])
        if row is None:
            return None
        await self._wake_workers([message])
        return int(row[0])

    async def add_message_with_media(self, message: NewMessage) -> int | None:
        """:meth:`add_message` for a message with media: both in one transaction."""
        values = self._message_values(message)

        async def insert(tx: Transaction) -> int | None:
            return await self._insert_message(tx, values, message.media)

        message_id = await self._atomically(insert)
        self._stored([message])
        if message_id is not None:
            await self._wake_workers([message])
        return message_id

    async def add_messages(self, messages: Sequence[NewMessage]) -> list[int | None]:
        message_ids = await self._insert_messages(messages)
        self._stored(messages)
        await self._wake_workers(
            [m for m, found in zip(messages, message_ids, strict=True) if found is not None]
        )
        return message_ids

    async def _wake_workers(self, stored: Sequence[NewMessage]) -> None:
        """Tell other workers that these messages were stored (committed): SQLite has one
        worker, which wakes itself."""
        del stored

    async def _insert_messages(self, messages: Sequence[NewMessage]) -> list[int | None]:
        """Record the messages (and their media) in one transaction; the id of each, None
        for one already stored."""
        rows = [(self._message_values(m), m.media) for m in messages]

        async def insert(tx: Transaction) -> list[int | None]:
            return [await self._insert_message(tx, values, media) for values, media in rows]

        return await self._atomically(insert)

    async def _insert_message(
        self, tx: Transaction, values: tuple[Any, ...], media: Sequence[NewMedia]
    ) -> int | None:
        """Record one message (its :meth:`_message_values`, made before the transaction:
        the index terms are the event loop's work, not the database thread's) and its media
        inside the caller's transaction."""
        message_id = await tx.value(INSERT_MESSAGE, *values)
        if message_id is None:
            return None
        await tx.write_many(INSERT_MEDIA, [(message_id, *media_values(x)) for x in media])
        return int(message_id)

    def _message_values(self, m: NewMessage) -> tuple[Any, ...]:
        """INSERT_MESSAGE's parameters for one message, its index terms made here."""
        searchable = m.role in SEARCHABLE_ROLES and m.partner_id
        threaded = bool(searchable and m.role in THREAD_ROLES)
        scope = audience_token(m.partner_id, m.audience) if m.partner_id and searchable else None
        return (
            m.dedup_key, m.queue_key, m.session_id, m.partner_id, m.chat_key,
            m.platform_message_id, m.user_key, m.speaker, m.role, m.text, m.audience, m.status,
            m.created_at if m.created_at is not None else time.time(), m.answers_upto,
            self._terms(m.text, m.partner_id, scope) if scope else None, scope, threaded,
        )  # fmt: skip

    async def message(self, message_id: int) -> MessageRow | None:
        rows = await self._messages("WHERE id = ?", message_id)
        return rows[0] if rows else None

    async def session_messages(
        self, session_id: str, roles: Sequence[str] = ("user", "assistant"), after_id: int = 0
    ) -> list[MessageRow]:
        marks = ", ".join("?" for _ in roles)
        return await self._messages(
            f"WHERE session_id = ? AND role IN ({marks}) AND id > ? AND status != 'pending'"
            " ORDER BY id",
            session_id,
            *roles,
            after_id,
        )

    async def reviewable_messages(self, session_id: str, after_id: int) -> list[MessageRow]:
        """The session's conversation after ``after_id`` up to its chat's first message still
        waiting for its turn (see :class:`bot.store.protocol.messages.MessagesStore`); one
        statement, so the rows and the wait are read at one moment."""
        return await self._messages(REVIEWABLE, session_id, after_id)

    async def recent_context(self, chat_key: str, after_id: int, limit: int) -> list[MessageRow]:
        """Unaddressed group chatter since ``after_id``, oldest first, at most ``limit``."""
        rows = await self._messages(
            "WHERE chat_key = ? AND role = 'context' AND id > ? ORDER BY id DESC LIMIT ?",
            chat_key,
            after_id,
            limit,
        )
        return rows[::-1]

    async def chat_tail(
        self, chat_key: str, after_id: int, limit: int, upto_id: int = NO_MESSAGE_YET
    ) -> list[MessageRow]:
        """A group's conversation since ``after_id`` (what people and partners said, answered
        or not, in any state) up to ``upto_id``, oldest first, at most the newest ``limit``."""
        rows = await self._messages(
            "WHERE chat_key = ? AND role IN ('user', 'context', 'assistant') AND id > ?"
            " AND id <= ? ORDER BY id DESC LIMIT ?",
            chat_key,
            after_id,
            upto_id,
            limit,
        )
        return rows[::-1]

    async def recent_reactions(
        self, chat_key: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[MessageRow]:
        """Users' reactions to a partner's messages since ``after_id``, oldest first."""
        rows = await self._messages(RECENT_REACTIONS, chat_key, partner_id, after_id, limit)
        return rows[::-1]

    async def last_inbound_at(self, chat_key: str) -> float | None:
        """When the newest stored inbound message of a chat was written (platform time)."""
        row = await self._one(
            "SELECT created_at FROM messages WHERE chat_key = ? AND role IN ('user', 'context')"
            " ORDER BY id DESC LIMIT 1",
            chat_key,
        )
        return float(row[0]) if row is not None else None

    async def set_message_text(
        self, message_id: int, text: str, media: tuple[str, str, str] | None = None
    ) -> None:
        """Replace a message's text (a transcript, a photo's description), index included;
        ``media`` (kind, ref, state) is the state of the medium it came from, set with it.
        Its neighbours' context columns are rewritten."""
        async with self._transaction() as tx:
            if media is not None:
                await tx.write(
                    "UPDATE media SET state = ? WHERE message_id = ? AND kind = ? AND ref = ?",
                    media[2],
                    message_id,
                    media[0],
                    media[1],
                )
            row = await tx.one(
                "SELECT partner_id, role, audience FROM messages WHERE id = ?", message_id
            )
            if row is None:
                return
            partner_id, role, audience = row
            searchable = role in SEARCHABLE_ROLES and partner_id
            scope = audience_token(partner_id, audience) if searchable else None
            terms = self._terms(text, partner_id, scope) if scope else None
            await tx.write(
                "UPDATE messages SET text = ?, terms = ?, scope = ? WHERE id = ?",
                text,
                terms,
                scope,
                message_id,
            )
            await self._rewrite_neighbours(tx, await self._threads(tx, "id = ?", message_id))
        if scope:
            self._new_searchable.set()  # embedded again (embedding_redo)

    async def partner_messages(self, partner_id: str) -> list[MessageRow]:
        """Every recorded message of a partner, session by session (for an export)."""
        return await self._messages(
            "WHERE partner_id = ? AND status != 'pending' ORDER BY session_id NULLS FIRST, id",
            partner_id,
        )

    async def reply_counts(self, since: float) -> dict[str, int]:
        """Replies recorded since a time: 'assistant' answers and 'notice' apologies."""
        rows = await self._all(
            "SELECT role, COUNT(*) FROM messages WHERE created_at >= ?"
            " AND role IN ('assistant', 'notice') GROUP BY role",
            since,
        )
        return {row[0]: int(row[1]) for row in rows}

    async def _messages(self, where: str, *args: Any) -> list[MessageRow]:
        rows = await self._all(f"SELECT {MESSAGE_COLUMNS} FROM messages {where}", *args)
        return [MessageRow(*row) for row in rows]
