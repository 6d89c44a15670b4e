"""Chats: a DM, group, channel, thread or forum topic with the partner selected in it, and the
bindings of groups and channels to partners (from config.toml or ``/admin bind``).

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.chats.Chats` (PostgreSQL reads a chat and its person in one statement:
:mod:`bot.store.postgres.chats`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from bot.store.admin_rows import BindingRow, UserRow
from bot.store.rows import ChatRow


class ChatsStore(Protocol):
    """Where conversations happen and which partner answers there."""

    async def upsert_chat(
        self,
        chat_key: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        kind: str,
        title: str | None,
    ) -> None: ...

    async def chat(self, chat_key: str) -> ChatRow | None: ...

    async def chat_and_user(
        self, chat_key: str, user_key: str
    ) -> tuple[ChatRow | None, UserRow | None]:
        """A chat and one of its people (a turn needs both; one round trip on PostgreSQL)."""

    async def selected_partner(self, chat_key: str) -> str | None: ...

    async def select_partner(self, chat_key: str, partner_id: str | None) -> None: ...

    async def bind(self, platform: str, chat_id: str, partner_id: str, source: str) -> bool: ...

    async def unbind(self, platform: str, chat_id: str, partner_id: str | None) -> int: ...

    async def bindings(
        self, platform: str | None = None, chat_id: str | None = None
    ) -> list[BindingRow]: ...

    async def replace_config_bindings(self, rows: Iterable[tuple[str, str, str]]) -> None: ...
