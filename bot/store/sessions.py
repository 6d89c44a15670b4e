"""Sessions: one thread of conversation between a partner and a chat, with its frozen system
prompt; the owner's views of them and the transcripts referenced from owner sessions. One
query text for both backends."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from bot.store.base import StoreBase
from bot.store.rows import SessionRow, new_session_id

SESSION_COLUMNS = (
    "id, partner_id, chat_key, user_key, audience, kind, carry_from, title, system_prompt, "
    "created_at, last_active_at, ended_at, reviewed_upto, review_attempts, review_error, "
    "review_due_at"
)
OF_PARTNER = "WHERE partner_id = ?1 AND (CAST(?2 AS text) IS NULL OR user_key = ?2)"
"""A partner's sessions, or one user's with it when ``?2`` is not null."""
OF_CHAT_AND_PARTNER = (
    "chat_key = ?1 AND (partner_id = ?2 OR (partner_id IS NULL AND CAST(?2 AS text) IS NULL))"
)
"""A chat's sessions with partner ``?2`` (None: the owner assistant); a null-safe equality
both dialects read (SQLite says IS, PostgreSQL IS NOT DISTINCT FROM)."""


class Sessions(StoreBase):
    """Opening, ending and finding sessions."""

    async def open_session(self, chat_key: str, partner_id: str | None) -> SessionRow | None:
        rows = await self._sessions(
            f"WHERE {OF_CHAT_AND_PARTNER} AND ended_at IS NULL AND kind = 'chat'"
            " ORDER BY created_at DESC LIMIT 1",
            chat_key,
            partner_id,
        )
        return rows[0] if rows else None

    async def latest_session(
        self, chat_key: str, partner_id: str | None, kind: str = "chat"
    ) -> SessionRow | None:
        rows = await self._sessions(
            f"WHERE {OF_CHAT_AND_PARTNER} AND kind = ?3 ORDER BY created_at DESC LIMIT 1",
            chat_key,
            partner_id,
            kind,
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
        row = await self._one(
            "INSERT INTO sessions (id, partner_id, chat_key, user_key, audience, kind,"
            " carry_from, title, system_prompt, created_at, last_active_at)"
            f" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10) RETURNING {SESSION_COLUMNS}",
            session_id or new_session_id(), partner_id, chat_key, user_key, audience, kind,
            carry_from, title, system_prompt, time.time(),
        )  # fmt: skip
        assert row is not None
        return SessionRow(*row)

    async def session(self, session_id: str) -> SessionRow | None:
        rows = await self._sessions("WHERE id = ?1", session_id)
        return rows[0] if rows else None

    async def set_session_title(self, session_id: str, title: str) -> None:
        await self._write(
            "UPDATE sessions SET title = ?1 WHERE id = ?2 AND title = ''", title, session_id
        )

    async def end_session(self, session_id: str, reason: str) -> None:
        await self._write(
            "UPDATE sessions SET ended_at = ?1, end_reason = ?2 WHERE id = ?3 AND ended_at IS NULL",
            time.time(),
            reason,
            session_id,
        )

    async def end_chat_sessions(self, chat_key: str, reason: str) -> list[str]:
        """End this chat's open sessions, its consult thread included."""
        rows = await self._all(
            "UPDATE sessions SET ended_at = ?1, end_reason = ?2 WHERE chat_key IN (?3, ?4)"
            " AND ended_at IS NULL AND kind = 'chat' RETURNING id",
            time.time(), reason, chat_key, f"{chat_key}#consult",
        )  # fmt: skip
        return [row[0] for row in rows]

    async def sessions_of(self, partner_id: str, limit: int = 50) -> list[SessionRow]:
        return await self._sessions(
            "WHERE partner_id = ?1 ORDER BY last_active_at DESC LIMIT ?2", partner_id, limit
        )

    async def find_sessions(self, partner_id: str, id_prefix: str) -> list[SessionRow]:
        """A partner's sessions whose id starts with ``id_prefix`` (ids are shown shortened)."""
        return await self._sessions(
            "WHERE partner_id = ?1 AND substr(id, 1, ?2) = ?3 ORDER BY created_at DESC LIMIT 2",
            partner_id,
            len(id_prefix),
            id_prefix,
        )

    async def partner_sessions(
        self, partner_id: str, user_key: str | None = None, limit: int = 500, offset: int = 0
    ) -> list[SessionRow]:
        """A partner's sessions, newest activity first, optionally only one user's: ``limit``
        of them from ``offset``."""
        return await self._sessions(
            f"{OF_PARTNER} ORDER BY last_active_at DESC, id LIMIT ?3 OFFSET ?4",
            partner_id,
            user_key,
            limit,
            offset,
        )

    async def partner_session_count(self, partner_id: str, user_key: str | None = None) -> int:
        row = await self._one(f"SELECT COUNT(*) FROM sessions {OF_PARTNER}", partner_id, user_key)
        return int(row[0]) if row else 0

    async def message_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Conversation messages (user and assistant) per session."""
        if not session_ids:
            return {}
        marks = ", ".join("?" for _ in session_ids)
        rows = await self._all(
            f"SELECT session_id, COUNT(*) FROM messages WHERE session_id IN ({marks})"
            " AND role IN ('user', 'assistant') GROUP BY session_id",
            *session_ids,
        )
        return {row[0]: int(row[1]) for row in rows}

    async def last_activity(self) -> dict[str, float]:
        """When each partner last had a conversation."""
        rows = await self._all(
            "SELECT partner_id, MAX(last_active_at) FROM sessions WHERE partner_id IS NOT NULL"
            " GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}

    async def add_transcript_ref(self, session_id: str, referenced_id: str, keep: int) -> None:
        """Reference a session's transcript from an owner session; only the newest ``keep``
        references of that session stay."""
        async with self._transaction() as tx:
            await tx.write(
                "INSERT INTO transcript_refs (session_id, referenced_id, created_at)"
                " VALUES (?1, ?2, ?3) ON CONFLICT (session_id, referenced_id)"
                " DO UPDATE SET created_at = excluded.created_at",
                session_id, referenced_id, time.time(),
            )  # fmt: skip
            await tx.write(
                "DELETE FROM transcript_refs WHERE session_id = ?1 AND referenced_id NOT IN"
                " (SELECT referenced_id FROM transcript_refs WHERE session_id = ?1"
                " ORDER BY created_at DESC LIMIT ?2)",
                session_id,
                keep,
            )

    async def transcript_refs(self, session_id: str) -> list[str]:
        """The sessions referenced from ``session_id``, oldest first."""
        rows = await self._all(
            "SELECT referenced_id FROM transcript_refs WHERE session_id = ?1 ORDER BY created_at",
            session_id,
        )
        return [row[0] for row in rows]

    async def _sessions(self, where: str, *args: Any) -> list[SessionRow]:
        rows = await self._all(f"SELECT {SESSION_COLUMNS} FROM sessions {where}", *args)
        return [SessionRow(*row) for row in rows]

    async def count_sessions(self, chat_key: str, partner_id: str) -> int:
        """How many conversations this chat has had with this partner (which greeting is
        next, ``partners/greetings.py``)."""
        row = await self._one(
            "SELECT COUNT(*) FROM sessions WHERE chat_key = ?1 AND partner_id = ?2",
            chat_key,
            partner_id,
        )
        return int(row[0]) if row else 0
