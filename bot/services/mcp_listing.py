"""What the gateway knows of an MCP server without its SDK: a tool as the server lists it, and
the fault a server that cannot answer becomes. Kept apart from ``bot/services/mcp_server.py``
so that a gateway with no ``[mcp]`` servers never imports the SDK (tens of MB and seconds of
start-up it would not use)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ServerFault(Exception):
    """The server could not answer (not started, died, timed out); the message says which."""


@dataclass(frozen=True)
class ListedTool:
    """A tool as its server lists it."""

    name: str
    description: str
    parameters: dict[str, Any]
