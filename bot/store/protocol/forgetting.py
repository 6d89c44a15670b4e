"""What a user owns, and forgetting: tombstones, a user's messages and sessions, reminders, and
``/forget`` as a recorded operation whose steps a restart finishes (docs/architecture.md
"Forgetting is an operation, not a loop").

Part of :class:`bot.store.Store`; SQLite implements it in
:class:`bot.store.forgetting.Forgetting`, PostgreSQL in
:class:`bot.store.postgres.forgetting.Forgetting`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from bot.store.admin_rows import ReminderRow
from bot.store.rows import ForgetOperation, MessageRow


class ForgettingStore(Protocol):
    """Finding and removing every copy of what a user takes back."""

    async def add_tombstones(
        self, partner_id: str, user_key: str, hashes: Iterable[str]
    ) -> None: ...

    async def tombstones(self, partner_id: str, user_key: str) -> set[str]: ...

    async def partner_tombstones(self, partner_id: str) -> dict[str, set[str]]:
        """Every tombstone of a partner ("" for the owner's memory), hashes by key: a user's
        key for what they forgot, ``file:<name>`` for an entry the owner forgot from a file
        (see :mod:`partners.forgetting`)."""

    async def user_messages(self, partner_id: str, user_key: str) -> list[MessageRow]:
        """A user's messages with a partner and the partner's replies in their DMs."""

    async def user_message_ids(
        self, partner_id: str, user_key: str, roles: Sequence[str]
    ) -> list[int]:
        """A user's finished messages (of these roles) with a partner, their DM replies too."""

    async def journal_messages(self, partner_id: str) -> list[MessageRow]:
        """Every journal entry of a partner as search indexes it."""

    async def delete_messages(self, message_ids: Sequence[int]) -> int:
        """The one way a message leaves the store: the row, (by the delete trigger) its search
        index entry, and the copies of its words in its neighbours' context columns. Returns
        how many were still there."""

    async def forget_session_prompts(self, partner_id: str, user_key: str) -> None:
        """Frozen prompts hold the user's memory as it was: end those sessions and drop it."""

    async def sessions_titled_by(self, partner_id: str, user_key: str) -> list[str]:
        """A user's DM sessions with a partner, and group sessions opened by their message:
        a session's title is its first message."""

    async def clear_session_titles(self, session_ids: Sequence[str]) -> None: ...

    async def user_reminders(self, partner_id: str, user_key: str) -> list[ReminderRow]: ...

    async def delete_reminders(self, reminder_ids: Sequence[int]) -> None: ...

    async def begin_forget(self, operation: ForgetOperation) -> ForgetOperation:
        """Record a forget operation and its tombstones, in one transaction, before anything
        is removed (a ``request`` is recorded once: look it up first)."""

    async def forget_operation(self, request: str) -> ForgetOperation | None: ...

    async def unfinished_forgets(
        self, partner_id: str | None = None, user_key: str | None = None
    ) -> list[ForgetOperation]:
        """Operations a crash or a failed step left behind, oldest first."""

    async def forget_scrubbed(self, operation_id: int) -> None:
        """Every copy is gone: the operation keeps no text of its own any more."""

    async def forget_done(self, operation_id: int) -> None: ...

    async def erase_deleted_text(self) -> bool:
        """After forgetting: rebuild the search index's segments without the deleted rows'
        terms (an FTS5 delete only adds a marker; the terms stay in the old segments until a
        merge) and checkpoint the WAL into the database, truncating it, so no older page
        image keeps the text either. False if a reader kept the checkpoint from finishing."""
