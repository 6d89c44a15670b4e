"""MCP tool calls kept with the message their turn answered (a schema trigger deletes them
with it). One query text for both backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.base import StoreBase
from bot.store.rows import NewToolCall, ToolCallRow

COLUMNS = (
    "message_id, chat_key, session_id, partner_id, user_key, server, tool, arguments, result,"
    " is_error, created_at"
)


class ToolCalls(StoreBase):
    """Tool calls of conversations."""

    async def add_tool_call(self, call: NewToolCall) -> None:
        await self._write(
            f"INSERT INTO tool_calls ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            call.message_id,
            call.chat_key,
            call.session_id,
            call.partner_id,
            call.user_key,
            call.server,
            call.tool,
            call.arguments,
            call.result,
            int(call.is_error),
            call.created_at,
        )

    async def tool_call_counts(self, since: float) -> dict[str, int]:
        rows = await self._all(
            "SELECT server, count(*) FROM tool_calls WHERE created_at >= ? GROUP BY server",
            since,
        )
        return {str(row[0]): int(row[1]) for row in rows}

    async def user_tool_calls(self, partner_id: str, user_key: str) -> list[ToolCallRow]:
        rows = await self._all(
            f"SELECT {COLUMNS} FROM tool_calls WHERE partner_id = ? AND user_key = ? ORDER BY id",
            partner_id,
            user_key,
        )
        return [row_of(row) for row in rows]


def row_of(row: Sequence[Any]) -> ToolCallRow:
    """A :data:`COLUMNS` row as a :class:`ToolCallRow` (SQLite stores the flag as 0 or 1)."""
    message_id, chat_key, session_id, partner_id, user_key, server, tool = row[:7]
    arguments, result, is_error, created_at = row[7:11]
    return ToolCallRow(
        int(message_id),
        chat_key,
        session_id,
        partner_id,
        user_key,
        server,
        tool,
        arguments,
        result,
        bool(is_error),
        float(created_at),
    )
