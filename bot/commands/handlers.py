"""What answers each command of ``bot/commands/table.py``: the handlers by name, and
:func:`run_command`, which the gateway calls with one message's :class:`CommandContext`.

The table declares, this module serves: the channels import the declarations alone, the
gateway this module, which pulls in the handlers and, through ``/admin``, the owner's.
"""

from __future__ import annotations

from bot.admin.table import run_admin
from bot.commands import memory, user
from bot.commands.table import COMMANDS, UNKNOWN
from bot.commands.types import CommandContext, CommandReply, Handler

HANDLERS: dict[str, Handler] = {
    "start": user.start,
    "help": user.help_command,
    "partner": user.partner,
    "new": user.new,
    "memory": memory.memory,
    "forget": memory.forget,
    "export": memory.export,
    "checkins": user.checkins,
    "timezone": user.timezone,
    "voice": user.voice,
    "admin": run_admin,
}
"""One per declared command (a test holds the two lists equal)."""


async def run_command(ctx: CommandContext, name: str) -> CommandReply:
    """Run a command, answering an unknown one — or /admin from a non-owner — the same way."""
    command = COMMANDS.get(name)
    if command is None or (command.owner_only and not ctx.is_owner):
        return CommandReply(UNKNOWN)
    if command.dm_only and not ctx.inbound.chat.is_dm:
        return CommandReply(f"/{name} works in a direct message with me.")
    return await HANDLERS[name](ctx)
