"""Every MCP server of ``[mcp]``, by name: made when the gateway is built, none started until a
turn first needs one, all stopped with the gateway (``bot/app/lifecycle.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bot.config.mcp import McpConfig
from bot.services.mcp_server import McpServer


@dataclass(frozen=True)
class ServerStatus:
    """What ``/admin status`` and ``companion doctor`` say about one server."""

    name: str
    running: bool
    calls: int
    error: str | None


class McpServers:
    """The configured servers; each is started by its first use."""

    def __init__(self, config: McpConfig) -> None:
        self.config = config
        self.servers = {
            name: McpServer(name, server, config.restart_backoff_seconds)
            for name, server in config.servers.items()
        }

    def get(self, name: str) -> McpServer | None:
        return self.servers.get(name)

    def statuses(self) -> list[ServerStatus]:
        return [
            ServerStatus(name, server.running, server.calls, server.last_error)
            for name, server in sorted(self.servers.items())
        ]

    async def aclose(self) -> None:
        """Stop every running server (their programs end with them)."""
        await asyncio.gather(*(server.stop() for server in self.servers.values()))
