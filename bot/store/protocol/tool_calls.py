"""Tool calls: what a partner sent to an MCP tool and read back, kept with the message its turn
answered (deleted with it: /forget takes them along).

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.tool_calls.ToolCalls`."""

from __future__ import annotations

from typing import Protocol

from bot.store.rows import NewToolCall, ToolCallRow


class ToolCallsStore(Protocol):
    """The MCP tool calls of conversations."""

    async def add_tool_call(self, call: NewToolCall) -> None: ...

    async def tool_call_counts(self, since: float) -> dict[str, int]:
        """Calls per server made since ``since`` (``/admin usage``)."""

    async def user_tool_calls(self, partner_id: str, user_key: str) -> list[ToolCallRow]:
        """The calls a user's messages led this partner to make, oldest first."""
