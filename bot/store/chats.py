"""Chats (a DM, group, channel, thread or forum topic) with the partner selected in them,
and the bindings of groups and channels to partners, from config.toml or ``/admin bind``."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import cast

from bot.store.connection import Connection, SqliteBase
from bot.store.rows import BindingRow, ChatRow, UserRow
from bot.store.users import USER_BY_KEY

CHAT_BY_KEY = (
    "SELECT chat_key, platform, platform_chat_id, thread_id, kind, title, selected_partner"
    " FROM chats WHERE chat_key = ?"
)


class Chats(SqliteBase):
    """Chats and bindings."""

    def __init__(self, db: Connection, path: Path) -> None:
        super().__init__(db, path)
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
        now = time.time()
        await self._sqlite_write(
            "INSERT INTO chats (chat_key, platform, platform_chat_id, thread_id, kind, title,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (chat_key) DO UPDATE SET title = excluded.title,"
            " updated_at = excluded.updated_at WHERE title IS NOT excluded.title",
            (chat_key, platform, chat_id, thread_id, kind, title, now, now),
        )
        self._written_chats[chat_key] = (kind, title)

    async def chat(self, chat_key: str) -> ChatRow | None:
        row = await self._sqlite_one(CHAT_BY_KEY, (chat_key,))
        return ChatRow(*row) if row else None

    async def chat_and_user(
        self, chat_key: str, user_key: str
    ) -> tuple[ChatRow | None, UserRow | None]:
        """A chat and one of its people, read in one round trip (a turn needs both)."""

        def read(db: sqlite3.Connection) -> tuple[ChatRow | None, UserRow | None]:
            chat = db.execute(CHAT_BY_KEY, (chat_key,)).fetchone()
            user = db.execute(USER_BY_KEY, (user_key,)).fetchone()
            return (
                ChatRow(*chat) if chat else None,
                cast(UserRow, dict(user)) if user else None,
            )

        return await self._db.run(read)

    async def selected_partner(self, chat_key: str) -> str | None:
        row = await self._sqlite_one(
            "SELECT selected_partner FROM chats WHERE chat_key = ?", (chat_key,)
        )
        return row[0] if row else None

    async def select_partner(self, chat_key: str, partner_id: str | None) -> None:
        await self._sqlite_write(
            "UPDATE chats SET selected_partner = ?, updated_at = ? WHERE chat_key = ?",
            (partner_id, time.time(), chat_key),
        )

    async def bind(self, platform: str, chat_id: str, partner_id: str, source: str) -> bool:
        cursor = await self._sqlite_write(
            "INSERT OR IGNORE INTO bindings (platform, chat_id, partner_id, source, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (platform, chat_id, partner_id, source, time.time()),
        )
        return cursor.rowcount > 0

    async def unbind(self, platform: str, chat_id: str, partner_id: str | None) -> int:
        sql = "DELETE FROM bindings WHERE platform = ? AND chat_id = ? AND source != 'config'"
        params: tuple[str, ...] = (platform, chat_id)
        if partner_id is not None:
            sql += " AND partner_id = ?"
            params += (partner_id,)
        cursor = await self._sqlite_write(sql, params)
        return cursor.rowcount

    async def bindings(
        self, platform: str | None = None, chat_id: str | None = None
    ) -> list[BindingRow]:
        sql = "SELECT platform, chat_id, partner_id, source FROM bindings WHERE 1 = 1"
        params: list[str] = []
        if platform is not None:
            sql += " AND platform = ?"
            params.append(platform)
        if chat_id is not None:
            sql += " AND chat_id = ?"
            params.append(chat_id)
        return [
            cast(BindingRow, dict(row))
            for row in await self._sqlite_all(sql + " ORDER BY created_at", params)
        ]

    async def replace_config_bindings(self, rows: Iterable[tuple[str, str, str]]) -> None:
        now = time.time()
        async with self._transaction():
            await self._db.execute("DELETE FROM bindings WHERE source = 'config'")
            await self._db.executemany(
                "INSERT OR REPLACE INTO bindings (platform, chat_id, partner_id, source,"
                " created_at) VALUES (?, ?, ?, 'config', ?)",
                [(p, c, partner, now) for p, c, partner in rows],
            )
