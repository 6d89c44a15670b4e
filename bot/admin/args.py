"""Shared pieces of the owner's commands: usage errors, the services they reach, user keys,
the file sent with a command and files too big to send."""

from __future__ import annotations

from adapters.base import DeliveryError, MediaTooBig
from bot.admin.services import AdminServices
from bot.commands.types import CommandContext, CommandReply
from bot.text.literal import literal_line

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


async def sent_file(ctx: CommandContext, max_bytes: int) -> tuple[str, bytes] | None:
    """The document sent with this command as (file name, content), fetched from the platform
    only now, by the command that reads it (the gateway gives owner commands alone a way to
    fetch). None if the message had none. Over ``max_bytes`` (as the platform reports its
    size, then as fetched) or not fetchable, the owner is told what to send instead."""
    attachment = ctx.inbound.attachment
    if attachment is None:
        return None
    name = literal_line(attachment.filename)
    too_big = f"{name} is over {max_bytes:,} bytes, the most this command takes"
    if attachment.size is not None and attachment.size > max_bytes:
        raise AdminError(f"{too_big}: send a smaller file")
    if ctx.download is None:
        raise AdminError(f"{name} cannot be fetched from this chat")
    try:
        data = await ctx.download(attachment.ref)
    except MediaTooBig as exc:
        raise AdminError(f"{name} is too big to fetch ({exc}): send a smaller file") from exc
    except DeliveryError as exc:
        raise AdminError(f"{name} could not be fetched ({exc}); send it again") from exc
    if len(data) > max_bytes:
        raise AdminError(f"{too_big}: send a smaller file")
    return attachment.filename, data


def file_reply(text: str, filename: str, data: bytes, kept_at: str | None = None) -> CommandReply:
    """Send a file when it is small enough, else say where it is."""
    size = f"{len(data) / (1024 * 1024):.1f} MB"
    if len(data) <= MAX_SEND_BYTES:
        return CommandReply(f"{text} ({size})", attachment=(filename, data))
    where = f" It is at {kept_at}." if kept_at else ""
    return CommandReply(f"{text}: {size} is too big to send here.{where}")
