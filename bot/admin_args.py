"""Shared pieces of the owner's commands: usage errors, the services they reach, user keys and
files too big to send."""

from __future__ import annotations

from bot.admin_services import AdminServices
from bot.commands import CommandContext, CommandReply

MAX_SEND_BYTES = 20 * 1024 * 1024
"""Larger archives stay on disk (Telegram bots may send 50 MB; leave room below it)."""


class AdminError(ValueError):
    """An owner command could not run as asked; the message says why and what to send."""


def need(ctx: CommandContext, count: int, usage: str) -> None:
    """At least ``count`` arguments, else the usage line."""
    if len(ctx.args) < count:
        raise AdminError(f"Usage: /admin {usage}")


def services(ctx: CommandContext) -> AdminServices:
    if ctx.admin is None:
        raise AdminError("owner services are not available in this process")
    return ctx.admin


def user_key_arg(ctx: CommandContext, raw: str) -> str:
    """``platform:id`` as given, or a bare id on the platform the owner writes from."""
    return raw if ":" in raw else f"{ctx.inbound.chat.platform}:{raw}"


def file_reply(text: str, filename: str, data: bytes, kept_at: str | None = None) -> CommandReply:
    """Send a file when it is small enough, else say where it is."""
    size = f"{len(data) / (1024 * 1024):.1f} MB"
    if len(data) <= MAX_SEND_BYTES:
        return CommandReply(f"{text} ({size})", attachment=(filename, data))
    where = f" It is at {kept_at}." if kept_at else ""
    return CommandReply(f"{text}: {size} is too big to send here.{where}")
