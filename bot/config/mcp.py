"""``[mcp]``: the MCP (Model Context Protocol) servers partners may use as tools, and what a
turn may spend on them (docs/tools.md).

A server is either a program the gateway starts and speaks to over its stdin and stdout
(``command``, ``args``, ``env``, ``cwd``) or an address it reaches over streamable HTTP (``url``,
``headers``), never both. Values of ``env`` and ``headers`` usually carry keys: they are kept as
secrets, never shown in a message or a command's answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, SecretStr, ValidationInfo, field_validator

from bot.config.section import Section

SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,23}$")
"""A server's name: part of every tool name the model sees (``clock__now``), so short, lower
case and without ``_`` (two underscores separate the server from its tool)."""


def _server_name(name: str) -> str:
    if not SERVER_NAME.match(name):
        raise ValueError(
            "a server's name is 1-24 lower-case letters, digits or '-' "
            "(it starts every tool name the model sees); rename the table"
        )
    return name


ServerName = Annotated[str, AfterValidator(_server_name)]


class ToolSettings(Section):
    """One tool of a server, by its name there (``[mcp.servers.mail.tools.send]``)."""

    confirm: bool = False
    """Each call waits for the person's yes, asked with the call and its arguments shown as
    they are (``bot/turn/confirmations.py``)."""


class ServerConfig(Section):
    """One MCP server (``[mcp.servers.NAME]``)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    """Set for the program on top of a few safe ones (PATH, HOME, ...), not the gateway's own."""
    cwd: Path | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    url: str | None = Field(None, validate_default=True)
    timeout_seconds: float = Field(30.0, gt=0, le=3600)
    """How long one call may take before the model is told it failed."""
    start_seconds: float = Field(60.0, gt=0, le=3600)
    """How long the server may take to start and list its tools (a program fetched by npx or
    uvx on its first start takes a while); a turn waits that long at most, once."""
    owner_only: bool = False
    """Offered only in the owner's own direct chats, whatever a preset.yml says."""
    tools: dict[str, ToolSettings] = Field(default_factory=dict)

    # The checks across keys sit on url, the last of them, not on the whole server: an error
    # shows the url, never the table with its env and headers (they hold keys).
    @field_validator("url", mode="after")
    @classmethod
    def _one_transport(cls, value: str | None, info: ValidationInfo) -> str | None:
        command = info.data.get("command")
        if (command is None) == (value is None):
            raise ValueError(
                "give either command (a program started over stdio) or url (streamable HTTP), "
                "exactly one of them"
            )
        if value is not None and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError("must start with http:// or https:// and name a host")
        if value is not None and (info.data.get("args") or info.data.get("env")):
            raise ValueError("args and env are for a command; an url server takes headers")
        if value is None and info.data.get("headers"):
            raise ValueError("headers are for an url server; a command takes env")
        return value


class McpConfig(Section):
    """Every MCP server, and the per-turn caps on what their tools cost."""

    servers: dict[ServerName, ServerConfig] = Field(default_factory=dict)
    max_schema_bytes: int = Field(6000, ge=200, le=1_000_000)
    """The JSON bytes of MCP tool schemas one turn may send; tools past it are left out."""
    max_tools: int = Field(20, ge=1, le=128)
    """MCP tools one turn may offer."""
    max_result_chars: int = Field(4000, ge=100, le=200_000)
    """A tool's result is cut to this many characters before the model reads it."""
    confirm_seconds: float = Field(120.0, gt=0, le=3600)
    """How long a tool marked ``confirm`` waits for the person's answer; then the call is not
    made, and the model is told the person did not confirm it."""
    restart_backoff_seconds: float = Field(5.0, gt=0, le=3600)
    """The first wait before a server that died or could not start is tried again; it doubles
    with each failure in a row, up to five minutes."""
