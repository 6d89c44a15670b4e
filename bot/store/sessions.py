"""Sessions: one thread of conversation between a partner and a chat, with its frozen system
prompt; the owner's views of them and the transcripts referenced from owner sessions."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from bot.store.connection import SqliteBase
from bot.store.rows import SessionRow, new_session_id

SESSION_COLUMNS = (
    "id, partner_id, chat_key, user_key, audience, kind, carry_from, title, system_prompt, "
    "created_at, last_active_at, ended_at, reviewed_upto, review_attempts, review_error, "
    "review_due_at"
)
OPEN_SESSION = (
    "WHERE chat_key = ? AND partner_id IS ? AND ended_at IS NULL AND kind = 'chat'"
    " ORDER BY created_at DESC LIMIT 1"
)
"""The open conversation of a chat with a partner (None: the owner assistant)."""


class Sessions(SqliteBase):
    """Opening, ending and finding sessions."""

    async def open_session(self, chat_key: str, partner_id: str | None) -> SessionRow | None:
        rows = await self._sessions(OPEN_SESSION, (chat_key, partner_id))
        return rows[0] if rows else None

    async def latest_session(
        self, chat_key: str, partner_id: str | None, kind: str = "chat"
    ) -> SessionRow | None:
        rows = await self._sessions(
            "WHERE chat_key = ? AND partner_id IS ? AND kind = ? ORDER BY created_at DESC LIMIT 1",
            (chat_key, partner_id, kind),
        )
        return rows[0] if rows else None

    async def create_session(
        self,
        *,
        partner_id: str | None,
        chat_key: str,
        user_key: str | None,
        audience: str,
        system_prompt: str,
        title: str = "",
        kind: str = "chat",
        carry_from: str | None = None,
        session_id: str | None = None,
    ) -> SessionRow:
        now = time.time()
        session_id = session_id or new_session_id()
        await self._sqlite_write(
            "INSERT INTO sessions (id, partner_id, chat_key, user_key, audience, kind,"
            " carry_from, title, system_prompt, created_at, last_active_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                partner_id,
                chat_key,
                user_key,
                audience,
                kind,
                carry_from,
                title,
                system_prompt,
                now,
                now,
            ),
        )
        session = await self.session(session_id)
        assert session is not None
        return session

    async def session(self, session_id: str) -> SessionRow | None:
        rows = await self._sessions("WHERE id = ?", (session_id,))
        return rows[0] if rows else None

    async def set_session_title(self, session_id: str, title: str) -> None:
        await self._sqlite_write(
            "UPDATE sessions SET title = ? WHERE id = ? AND title = ''", (title, session_id)
        )

    async def end_session(self, session_id: str, reason: str) -> None:
        await self._sqlite_write(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
            (time.time(), reason, session_id),
        )

    async def end_chat_sessions(self, chat_key: str, reason: str) -> list[str]:
        """End this chat's open sessions, its consult thread included."""
        rows = await self._sessions(
            "WHERE chat_key IN (?, ?) AND ended_at IS NULL AND kind = 'chat'",
            (chat_key, f"{chat_key}#consult"),
        )
        for row in rows:
            await self.end_session(row.id, reason)
        return [row.id for row in rows]

    async def sessions_of(self, partner_id: str, limit: int = 50) -> list[SessionRow]:
        return await self._sessions(
            "WHERE partner_id = ? ORDER BY last_active_at DESC LIMIT ?", (partner_id, limit)
        )

    async def find_sessions(self, partner_id: str, id_prefix: str) -> list[SessionRow]:
        """A partner's sessions whose id starts with ``id_prefix`` (ids are shown shortened)."""
        return await self._sessions(
            "WHERE partner_id = ? AND substr(id, 1, ?) = ? ORDER BY created_at DESC LIMIT 2",
            (partner_id, len(id_prefix), id_prefix),
        )

    async def partner_sessions(
        self, partner_id: str, user_key: str | None = None, limit: int = 500, offset: int = 0
    ) -> list[SessionRow]:
        """A partner's sessions, newest activity first, optionally only one user's: ``limit``
        of them from ``offset``."""
        where, params = _of_partner(partner_id, user_key)
        return await self._sessions(
            where + " ORDER BY last_active_at DESC, id LIMIT ? OFFSET ?", (*params, limit, offset)
        )

    async def partner_session_count(self, partner_id: str, user_key: str | None = None) -> int:
        where, params = _of_partner(partner_id, user_key)
        row = await self._sqlite_one(f"SELECT COUNT(*) FROM sessions {where}", params)
        return int(row[0]) if row else 0

    async def message_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Conversation messages (user and assistant) per session."""
        if not session_ids:
            return {}
        marks = ", ".join("?" for _ in session_ids)
        rows = await self._sqlite_all(
            f"SELECT session_id, COUNT(*) FROM messages WHERE session_id IN ({marks})"
            " AND role IN ('user', 'assistant') GROUP BY session_id",
            tuple(session_ids),
        )
        return {row[0]: int(row[1]) for row in rows}

    async def last_activity(self) -> dict[str, float]:
        """When each partner last had a conversation."""
        rows = await self._sqlite_all(
            "SELECT partner_id, MAX(last_active_at) FROM sessions WHERE partner_id IS NOT NULL"
            " GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}

    async def add_transcript_ref(self, session_id: str, referenced_id: str, keep: int) -> None:
        """Reference a session's transcript from an owner session; only the newest ``keep``
        references of that session stay."""
        async with self._transaction():
            await self._db.execute(
                "INSERT OR REPLACE INTO transcript_refs (session_id, referenced_id, created_at)"
                " VALUES (?, ?, ?)",
                (session_id, referenced_id, time.time()),
            )
            await self._db.execute(
                "DELETE FROM transcript_refs WHERE session_id = ? AND referenced_id NOT IN"
                " (SELECT referenced_id FROM transcript_refs WHERE session_id = ?"
                " ORDER BY created_at DESC LIMIT ?)",
                (session_id, session_id, keep),
            )

    async def transcript_refs(self, session_id: str) -> list[str]:
        """The sessions referenced from ``session_id``, oldest first."""
        rows = await self._sqlite_all(
            "SELECT referenced_id FROM transcript_refs WHERE session_id = ? ORDER BY created_at",
            (session_id,),
        )
        return [row[0] for row in rows]

    async def _sessions(self, where: str, params: Sequence[Any]) -> list[SessionRow]:
        return [
            SessionRow(*row)
            for row in await self._sqlite_all(
                f"SELECT {SESSION_COLUMNS} FROM sessions {where}", params
            )
        ]

    async def count_sessions(self, chat_key: str, partner_id: str) -> int:
        """How many conversations this chat has had with this partner (which greeting is
        next, ``partners/greetings.py``)."""
        row = await self._sqlite_one(
            "SELECT COUNT(*) AS n FROM sessions WHERE chat_key = ? AND partner_id = ?",
            (chat_key, partner_id),
        )
        return int(row["n"]) if row else 0


def _of_partner(partner_id: str, user_key: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its values) of a partner's sessions, or of one user's with it."""
    if user_key is None:
        return "WHERE partner_id = ?", [partner_id]
    return "WHERE partner_id = ? AND user_key = ?", [partner_id, user_key]
