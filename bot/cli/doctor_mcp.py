"""``companion doctor`` on ``[mcp]``: every server started once, as a turn would start it, and
named when it cannot start; the largest tool schemas named, since each costs request bytes on
every turn that offers it (``mcp.max_schema_bytes`` caps what one turn sends)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from bot.config.mcp import McpConfig
from bot.services.mcp_listing import ListedTool, ServerFault
from bot.services.mcp_servers import McpServers
from bot.turn.mcp_tools import offered, schema_bytes
from partners.tools import ToolContext

if TYPE_CHECKING:
    from bot.services.mcp_server import McpServer

LARGEST_SHOWN = 3

Check = tuple[bool | None, str]
"""A doctor's finding: ok (True), a problem (False) or a fact (None), and its line."""


async def mcp_checks(config: McpConfig) -> list[Check]:
    """One finding per server (started, with its tools, or why not) and the largest schemas."""
    if not config.servers:
        return []
    servers = McpServers(config)
    try:
        made = [s for name in servers.names if (s := servers.get(name)) is not None]
        listed = await asyncio.gather(*(_tools(s) for s in made))
    finally:
        await servers.aclose()
    checks: list[Check] = []
    sizes: list[tuple[int, str]] = []
    for server, tools in zip(made, listed, strict=True):
        if isinstance(tools, str):
            fix = f"check [mcp.servers.{server.name}] (command, args, cwd or url)"
            checks.append((False, f"MCP server {server.name} cannot start: {tools}; {fix}"))
            continue
        where = server.config.url or server.config.command
        checks.append((True, f"MCP server {server.name} ({where}) starts: {len(tools)} tool(s)"))
        for tool in tools:
            spec = offered(server.name, tool, _never_called)
            sizes.append((schema_bytes(spec), spec.name))
    if sizes:
        largest = sorted(sizes, reverse=True)[:LARGEST_SHOWN]
        named = ", ".join(f"{name} {size} B" for size, name in largest)
        cap = f"a turn sends at most {config.max_schema_bytes} B of them (mcp.max_schema_bytes)"
        checks.append((None, f"largest MCP tool schemas: {named}; {cap}"))
    return checks


async def _tools(server: McpServer) -> list[ListedTool] | str:
    try:
        return await server.tools()
    except ServerFault:
        return server.last_error or "it did not start"


async def _never_called(_ctx: ToolContext, _args: dict[str, Any]) -> str:
    raise AssertionError("the doctor only measures schemas")
