"""Chats (a DM, group, channel, thread or forum topic) with the partner selected in them,
and the bindings of groups and channels to partners, from config.toml or ``/admin bind``.
One query text for both backends; PostgreSQL reads a chat and its person in one statement
(:mod:`bot.store.postgres.chats`)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, cast

from bot.store.admin_rows import BindingRow, UserRow
from bot.store.base import StoreBase
from bot.store.rows import ChatRow
from bot.store.users import USER_BY_KEY

CHAT_COLUMNS = "chat_key, platform, platform_chat_id, thread_id, kind, title, selected_partner"
CHAT_BY_KEY = f"SELECT {CHAT_COLUMNS} FROM chats WHERE chat_key = ?"


class Chats(StoreBase):
    """Chats and bindings."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # what upsert_chat last wrote, so an unchanged title costs no write
        self._written_chats: dict[str, tuple[str, str | None]] = {}

    async def upsert_chat(
        self,
        chat_key: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        kind: str,
        title: str | None,
    ) -> None:
        if self._written_chats.get(chat_key) == (kind, title):
            return
        await self._write(
            "INSERT INTO chats AS c (chat_key, platform, platform_chat_id, thread_id, kind,"
            " title, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)"
            " ON CONFLICT (chat_key) DO UPDATE SET title = excluded.title,"
            " updated_at = excluded.updated_at"
            # a null-safe "differs" both read (SQLite has IS DISTINCT FROM only since 3.39)
            " WHERE (c.title = excluded.title) IS NOT TRUE"
            " AND (c.title IS NOT NULL OR excluded.title IS NOT NULL)",
            chat_key, platform, chat_id, thread_id, kind, title, time.time(),
        )  # fmt: skip
        self._written_chats[chat_key] = (kind, title)

    async def chat(self, chat_key: str) -> ChatRow | None:
        row = await self._one(CHAT_BY_KEY, chat_key)
        return ChatRow(*row) if row else None

    async def chat_and_user(
        self, chat_key: str, user_key: str
    ) -> tuple[ChatRow | None, UserRow | None]:
        """A chat and one of its people (a turn needs both)."""
        chat = await self._one(CHAT_BY_KEY, chat_key)
        user = await self._one(USER_BY_KEY, user_key)
        return ChatRow(*chat) if chat else None, cast(UserRow, dict(user)) if user else None

    async def selected_partner(self, chat_key: str) -> str | None:
        row = await self._one("SELECT selected_partner FROM chats WHERE chat_key = ?1", chat_key)
        return row[0] if row else None

    async def select_partner(self, chat_key: str, partner_id: str | None) -> None:
        await self._write(
            "UPDATE chats SET selected_partner = ?1, updated_at = ?2 WHERE chat_key = ?3",
            partner_id,
            time.time(),
            chat_key,
        )

    async def bind(self, platform: str, chat_id: str, partner_id: str, source: str) -> bool:
        added = await self._write(
            "INSERT INTO bindings (platform, chat_id, partner_id, source, created_at)"
            " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
            platform, chat_id, partner_id, source, time.time(),
        )  # fmt: skip
        return added > 0

    async def unbind(self, platform: str, chat_id: str, partner_id: str | None) -> int:
        return await self._write(
            "DELETE FROM bindings WHERE platform = ?1 AND chat_id = ?2 AND source != 'config'"
            " AND partner_id = coalesce(?3, partner_id)",
            platform,
            chat_id,
            partner_id,
        )

    async def bindings(
        self, platform: str | None = None, chat_id: str | None = None
    ) -> list[BindingRow]:
        rows = await self._all(
            "SELECT platform, chat_id, partner_id, source FROM bindings"
            " WHERE platform = coalesce(?1, platform) AND chat_id = coalesce(?2, chat_id)"
            " ORDER BY created_at",
            platform,
            chat_id,
        )
        return [cast(BindingRow, dict(row)) for row in rows]

    async def replace_config_bindings(self, rows: Iterable[tuple[str, str, str]]) -> None:
        now = time.time()
        async with self._transaction() as tx:
            await tx.write("DELETE FROM bindings WHERE source = 'config'")
            await tx.write_many(
                "INSERT INTO bindings (platform, chat_id, partner_id, source, created_at)"
                " VALUES (?1, ?2, ?3, 'config', ?4) ON CONFLICT (platform, chat_id, partner_id)"
                " DO UPDATE SET source = 'config', created_at = excluded.created_at",
                [(platform, chat_id, partner_id, now) for platform, chat_id, partner_id in rows],
            )
