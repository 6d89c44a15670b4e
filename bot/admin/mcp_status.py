"""What the owner's commands say of the MCP servers: ``/admin status`` (each one running, not
started yet, or failing and why, with its calls since the gateway started) and ``/admin tools
[partner]`` (each server's tools and which partners may use which)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from bot.admin.args import AdminError, services
from bot.commands.types import CommandContext, CommandReply
from bot.services.mcp_listing import ListedTool, ServerFault
from bot.services.mcp_servers import McpServers, ServerStatus
from bot.text.literal import literal_line
from bot.turn.mcp_tools import model_name, needs_yes, wanted
from partners.persona import Partner

if TYPE_CHECKING:
    from bot.services.mcp_server import McpServer


def mcp_lines(servers: McpServers | None) -> list[str]:
    """One line per configured server; nothing when ``[mcp]`` names none."""
    if servers is None or not servers.names:
        return []
    return ["MCP servers:", *(f"  {_line(status)}" for status in servers.statuses())]


def _line(status: ServerStatus) -> str:
    calls = f", {status.calls} call(s)" if status.calls else ""
    if status.running:
        return f"{status.name}: running{calls}"
    if status.error is not None:
        return f"{status.name}: NOT AVAILABLE — {status.error}{calls}"
    return f"{status.name}: not started yet (starts when a partner first needs it)"


async def admin_tools(ctx: CommandContext) -> CommandReply:
    """Each server's tools (starting the servers not running yet) and who may use them."""
    servers = services(ctx).mcp
    if servers is None or not servers.names:
        return CommandReply(
            "No MCP servers: add [mcp.servers.NAME] to config.toml (docs/tools.md)."
        )
    partners = ctx.catalog.all()
    if ctx.args:
        found = [p for p in partners if p.id == ctx.args[0]]
        if not found:
            raise AdminError(f"no partner {literal_line(ctx.args[0])}; /admin partners lists them")
        partners = found
    chosen = [s for name in servers.names if (s := servers.get(name)) is not None]
    listed = await asyncio.gather(*(_listed(server) for server in chosen))
    lines: list[str] = []
    for server, tools in zip(chosen, listed, strict=True):
        lines += _server_lines(server, tools, partners)
    return CommandReply("\n".join(lines))


async def _listed(server: McpServer) -> list[ListedTool] | None:
    try:
        return await server.tools()
    except ServerFault:
        return None


def _server_lines(
    server: McpServer, tools: list[ListedTool] | None, partners: list[Partner]
) -> list[str]:
    scope = " (owner only: your own direct chats)" if server.config.owner_only else ""
    if tools is None:
        return [f"{server.name}{scope}: NOT AVAILABLE — {server.last_error}"]
    lines = [f"{server.name}{scope}: {len(tools)} tool(s)"]
    for tool in tools:
        users = [p.name for p in partners if wanted(p, server.name, tool.name)]
        who = literal_line(", ".join(users)) if users else "no partner"
        if needs_yes(server, tool.name):
            who += " (asks the person first: confirm = true)"
        lines.append(f"  {literal_line(model_name(server.name, tool.name))}: {who}")
    return lines
