"""Sessions: one thread of conversation between a partner and a chat, with its frozen system
prompt; the owner's views of them and the transcripts referenced from owner sessions.

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.sessions.Sessions`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.store.rows import SessionRow


class SessionsStore(Protocol):
    """Conversations between a partner and a chat, opened, read and ended."""

    async def open_session(self, chat_key: str, partner_id: str | None) -> SessionRow | None: ...

    async def latest_session(
        self, chat_key: str, partner_id: str | None, kind: str = "chat"
    ) -> SessionRow | None: ...

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
    ) -> SessionRow: ...

    async def session(self, session_id: str) -> SessionRow | None: ...

    async def set_session_title(self, session_id: str, title: str) -> None: ...

    async def end_session(self, session_id: str, reason: str) -> None: ...

    async def end_chat_sessions(self, chat_key: str, reason: str) -> list[str]:
        """End this chat's open sessions, its consult thread included."""

    async def sessions_of(self, partner_id: str, limit: int = 50) -> list[SessionRow]: ...

    async def find_sessions(self, partner_id: str, id_prefix: str) -> list[SessionRow]:
        """A partner's sessions whose id starts with ``id_prefix`` (ids are shown shortened)."""

    async def partner_sessions(
        self, partner_id: str, user_key: str | None = None, limit: int = 500, offset: int = 0
    ) -> list[SessionRow]:
        """A partner's sessions, newest activity first, optionally only one user's: ``limit``
        of them from ``offset``."""

    async def partner_session_count(self, partner_id: str, user_key: str | None = None) -> int:
        """How many sessions :meth:`partner_sessions` pages through."""

    async def message_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Conversation messages (user and assistant) per session."""

    async def last_activity(self) -> dict[str, float]:
        """When each partner last had a conversation."""

    async def add_transcript_ref(self, session_id: str, referenced_id: str, keep: int) -> None:
        """Reference a session's transcript from an owner session; only the newest ``keep``
        references of that session stay."""

    async def transcript_refs(self, session_id: str) -> list[str]:
        """The sessions referenced from ``session_id``, oldest first."""

    async def count_sessions(self, chat_key: str, partner_id: str) -> int:
        """How many conversations this chat has had with this partner."""
