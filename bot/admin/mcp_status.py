"""What ``/admin status`` says of the MCP servers: each one running, not started yet, or failing
(and why), with the tool calls sent to it since the gateway started."""

from __future__ import annotations

from bot.services.mcp_servers import McpServers, ServerStatus


def mcp_lines(servers: McpServers | None) -> list[str]:
    """One line per configured server; nothing when ``[mcp]`` names none."""
    if servers is None or not servers.servers:
        return []
    return ["MCP servers:", *(f"  {_line(status)}" for status in servers.statuses())]


def _line(status: ServerStatus) -> str:
    calls = f", {status.calls} call(s)" if status.calls else ""
    if status.running:
        return f"{status.name}: running{calls}"
    if status.error is not None:
        return f"{status.name}: NOT AVAILABLE — {status.error}{calls}"
    return f"{status.name}: not started yet (starts when a partner first needs it)"
