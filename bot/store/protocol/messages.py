"""Messages: recording them (deduplicated by platform message id, indexed for search as they are
written), the platform update ids seen or rejected, and reading history back.

Part of :class:`bot.store.Store`, implemented once in :class:`bot.store.messages.Messages`
(PostgreSQL adds waking other workers: :class:`bot.store.postgres.messages.PostgresMessages`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.store.rows import MessageRow, NewMessage


class MessagesStore(Protocol):
    """Every message of every chat, and the platform updates already handled."""

    async def update_seen(self, platform: str, update_id: str) -> bool:
        """Whether :meth:`seen_update` recorded this platform update id (read only)."""

    async def seen_update(self, platform: str, update_id: str) -> bool:
        """Record a platform update id; True if it was recorded before (a duplicate)."""

    async def reject_update(self, platform: str, update_id: str) -> None:
        """Record a platform update the gateway could not read: skipped like a handled one
        if it comes again, and listed by :meth:`rejected_updates`."""

    async def rejected_updates(self, platform: str) -> list[str]:
        """Ids of the updates recorded by :meth:`reject_update`, oldest first."""

    async def add_message(self, message: NewMessage) -> int | None:
        """Record a message and index it; None if its dedup key was recorded before."""

    async def add_message_with_media(self, message: NewMessage) -> int | None:
        """:meth:`add_message` for a message with media: both in one transaction."""

    async def add_messages(self, messages: Sequence[NewMessage]) -> list[int | None]: ...

    async def message(self, message_id: int) -> MessageRow | None: ...

    async def session_messages(
        self, session_id: str, roles: Sequence[str] = ("user", "assistant"), after_id: int = 0
    ) -> list[MessageRow]: ...

    async def reviewable_messages(self, session_id: str, after_id: int) -> list[MessageRow]:
        """The session's conversation after ``after_id`` that a review may cover: up to, not
        including, the first message of its chat still waiting for its turn. A message that
        arrives while a turn runs is stored before that turn's reply; a watermark moved past
        it while it waited would leave it out of every later review."""

    async def recent_context(self, chat_key: str, after_id: int, limit: int) -> list[MessageRow]:
        """Unaddressed group chatter since ``after_id``, oldest first, at most ``limit``."""

    async def chat_tail(
        self, chat_key: str, after_id: int, limit: int, upto_id: int = 2**62
    ) -> list[MessageRow]:
        """A group's conversation since ``after_id`` (what people and partners said, answered
        or not, in any state) up to ``upto_id``, oldest first, at most the newest ``limit``."""

    async def recent_reactions(
        self, chat_key: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[MessageRow]:
        """Users' reactions to a partner's messages since ``after_id``, oldest first."""

    async def last_inbound_at(self, chat_key: str) -> float | None:
        """When the newest stored inbound message of a chat was written (platform time)."""

    async def set_message_text(
        self, message_id: int, text: str, media: tuple[str, str, str] | None = None
    ) -> None:
        """Replace a message's text (a transcript, a photo's description), index included;
        ``media`` (kind, ref, state) is the state of the medium it came from, set with it.
        The update trigger re-indexes the row; its neighbours' context columns are rewritten."""

    async def partner_messages(self, partner_id: str) -> list[MessageRow]:
        """Every recorded message of a partner, session by session (for an export)."""

    async def reply_counts(self, since: float) -> dict[str, int]:
        """Replies recorded since a time: 'assistant' answers and 'notice' apologies."""
