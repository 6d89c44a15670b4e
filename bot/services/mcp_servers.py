"""Every MCP server of ``[mcp]``, by name: none made or started until a turn first needs it,
all stopped with the gateway (``bot/app/lifecycle.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config.mcp import McpConfig

if TYPE_CHECKING:
    from bot.services.mcp_server import McpServer


@dataclass(frozen=True)
class ServerStatus:
    """What ``/admin status`` and ``companion doctor`` say about one server."""

    name: str
    running: bool
    calls: int
    error: str | None


class McpServers:
    """The configured servers; each is made (and the SDK imported) by its first use, and
    started then, so servers that no turn needs cost nothing, not even the SDK's memory."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self._made: dict[str, McpServer] = {}

    @property
    def names(self) -> list[str]:
        """Every configured server's name."""
        return list(self.config.servers)

    def get(self, name: str) -> McpServer | None:
        """The server of that name (None: not configured), made on first use."""
        server = self._made.get(name)
        settings = self.config.servers.get(name)
        if server is None and settings is not None:
            from bot.services.mcp_server import McpServer

            server = McpServer(name, settings, self.config.restart_backoff_seconds)
            self._made[name] = server
        return server

    def made(self) -> list[McpServer]:
        """The servers some use has made so far."""
        return list(self._made.values())

    def statuses(self) -> list[ServerStatus]:
        found = []
        for name in sorted(self.config.servers):
            server = self._made.get(name)
            if server is None:
                found.append(ServerStatus(name, False, 0, None))
            else:
                found.append(ServerStatus(name, server.running, server.calls, server.last_error))
        return found

    async def aclose(self) -> None:
        """Stop every running server (their programs end with them)."""
        await asyncio.gather(*(server.stop() for server in self._made.values()))
