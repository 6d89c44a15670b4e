"""Chats on PostgreSQL where its SQL differs (the rest is :mod:`bot.store.chats`): a chat and
its person read in one statement, the row of the person as JSON."""

from __future__ import annotations

import json
from typing import cast

from bot.store.admin_rows import UserRow
from bot.store.chats import CHAT_COLUMNS, Chats
from bot.store.rows import ChatRow


class PostgresChats(Chats):
    """Chats and bindings, a turn's first read in one round trip."""

    async def chat_and_user(
        self, chat_key: str, user_key: str
    ) -> tuple[ChatRow | None, UserRow | None]:
        """A chat and one of its people, read in one round trip (a turn needs both)."""
        row = await self._one(
            f"SELECT {', '.join('c.' + c for c in CHAT_COLUMNS.split(', '))},"
            " to_jsonb(u)::text AS person FROM (SELECT 1) AS one"
            " LEFT JOIN chats c ON c.chat_key = $1 LEFT JOIN users u ON u.user_key = $2",
            chat_key,
            user_key,
        )
        assert row is not None  # the one-row FROM always yields a row
        chat = ChatRow(*list(row)[:-1]) if row["chat_key"] is not None else None
        user = cast(UserRow, json.loads(row["person"])) if row["person"] else None
        return chat, user
