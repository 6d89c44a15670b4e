"""The owner's commands: every ``/admin`` subcommand, declared once with its usage and help.

``/admin`` is owner-only in :data:`bot.commands.table.COMMANDS`, so a non-owner never gets here:
they get the unknown-command answer and learn nothing. Subcommand names may be two words (``partner
new``). Every owner action leaves one audit row — written here, the single place, with the
arguments and the outcome — and an error the owner can fix comes back as its message.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.admin.access import (
    admin_allow,
    admin_approve,
    admin_bind,
    admin_block,
    admin_deny,
    admin_pending,
    admin_unbind,
)
from bot.admin.args import AdminError
from bot.admin.cards import admin_lore, partner_export, partner_import
from bot.admin.mcp_status import admin_tools
from bot.admin.memory import (
    admin_changes,
    admin_consult,
    admin_forget,
    admin_journal,
    admin_memory,
    admin_remember,
    admin_review,
    admin_sessions,
    admin_transcript,
    admin_undo,
)
from bot.admin.partner_export import admin_export
from bot.admin.partners import (
    admin_partners,
    admin_reload,
    partner_clone,
    partner_delete,
    partner_edit,
    partner_new,
    partner_put,
    partner_set,
    partner_show,
)
from bot.admin.scene import admin_scene
from bot.admin.status import admin_backup, admin_settings, admin_status, admin_usage
from bot.admin.voice import voice_forget
from bot.admin.web import admin_web
from bot.commands.paging import PageError
from bot.commands.types import CommandContext, CommandReply, Handler
from bot.config.memory_settings import SettingError
from bot.gateway.access import AccessError
from partners.memory_errors import MemoryInputError
from partners.persona import PartnerError
from partners.tools import ToolError

OWNER_ERRORS = (
    AccessError,
    AdminError,
    MemoryInputError,
    PageError,
    PartnerError,
    SettingError,
    ToolError,
)
"""Problems the owner can fix: answered with their message, recorded as refused."""


@dataclass(frozen=True)
class OwnerCommand:
    """One ``/admin`` subcommand with the handler that answers it (none is shown to the
    channels, so declaration and handler stand together here)."""

    name: str
    usage: str
    help: str
    handler: Handler
    dm_only: bool = True


def _owner_command(
    name: str, usage: str, help_text: str, handler: Handler, *, dm_only: bool = True
) -> OwnerCommand:
    """Owner commands answer in the owner's DM: in a group, everyone would read the answer.
    Only bind, unbind and scene belong in groups."""
    return OwnerCommand(name, usage, help_text, handler, dm_only=dm_only)


ADMIN: dict[str, OwnerCommand] = {
    c.name: c
    for c in (
        _owner_command(
            "partners", "", "partner cards: scope, chats, activity, tokens", admin_partners
        ),
        _owner_command(
            "partner new", "<id> <name>", "create a partner from the template", partner_new
        ),
        _owner_command(
            "partner clone", "<source> <id>", "copy a partner (no journals)", partner_clone
        ),
        _owner_command(
            "partner delete", "<id>", "move a partner to the trash (asks first)", partner_delete
        ),
        _owner_command("partner show", "<id>", "a partner's settings and files", partner_show),
        _owner_command("partner edit", "<id> <FILE>", "get a persona file to edit", partner_edit),
        _owner_command(
            "partner put",
            "<id> <FILE> <fingerprint> [path]",
            "save an edited file (its caption; the console: its path)",
            partner_put,
        ),
        _owner_command(
            "partner set",
            "<id> <key> <value> [--force]",
            "change preset.yml (name, model, memory_scope, proactive.enabled...)",
            partner_set,
        ),
        _owner_command(
            "partner import",
            "[id] | confirm <token>",
            "a character card sent as a file with this caption (asks first)",
            partner_import,
        ),
        _owner_command(
            "partner export", "<id> --card [json]", "a partner as a V3 card", partner_export
        ),
        _owner_command(
            "lore", "<partner> [query]", "lorebook entries and what fired last", admin_lore
        ),
        _owner_command(
            "bind", "<partner>", "bind a partner to this group", admin_bind, dm_only=False
        ),
        _owner_command("unbind", "[partner]", "unbind partners here", admin_unbind, dm_only=False),
        _owner_command(
            "scene", "[pause|resume]", "this group's cast and scene", admin_scene, dm_only=False
        ),
        _owner_command("approve", "<code>", "let a pairing user in", admin_approve),
        _owner_command("deny", "<code>", "refuse a pairing request", admin_deny),
        _owner_command("pending", "", "pairing requests waiting", admin_pending),
        _owner_command("allow", "<user>", "allow a user", admin_allow),
        _owner_command("block", "<user>", "block a user", admin_block),
        _owner_command(
            "memory", "[partner] [user]", "read your or a partner's memory", admin_memory
        ),
        _owner_command("remember", "<text>", "add to your memory", admin_remember),
        _owner_command("forget", "[partner] <entry>", "forget an entry for good", admin_forget),
        _owner_command("journal", "<partner> [date]", "a partner's journal", admin_journal),
        _owner_command("review", "<partner>", "review new conversation now", admin_review),
        _owner_command("changes", "[partner]", "latest memory changes, with ids", admin_changes),
        _owner_command("undo", "<change>", "reverse one memory change", admin_undo),
        _owner_command("consult", "<partner> <question>", "ask a partner", admin_consult),
        _owner_command(
            "transcript", "<partner> <session>", "show your assistant a session", admin_transcript
        ),
        _owner_command("sessions", "<partner> [user]", "a partner's sessions", admin_sessions),
        _owner_command(
            "status", "", "uptime, channels, queue, reviews, jobs, budgets", admin_status
        ),
        _owner_command(
            "tools", "[partner]", "MCP servers, their tools and who uses them", admin_tools
        ),
        _owner_command("usage", "[days]", "tokens and cost per partner, day and kind", admin_usage),
        _owner_command("settings", "[key value]", "show or change memory settings", admin_settings),
        _owner_command("reload", "", "re-read partner files", admin_reload),
        _owner_command(
            "export", "<partner>", "a partner's files and sessions as a .tar.gz", admin_export
        ),
        _owner_command("backup", "", "an archive of all data", admin_backup),
        _owner_command(
            "voice forget", "[partner]", "delete kept voice notes (speech.keep_audio)", voice_forget
        ),
        _owner_command("web", "[logout]", "a one-time link to the web page", admin_web),
    )
}


def admin_help(prefix: str = "") -> str:
    lines = [
        f"/admin {c.name} {c.usage}".rstrip() + f" — {c.help}"
        for c in ADMIN.values()
        if c.name.startswith(prefix)
    ]
    return "Owner commands:\n" + "\n".join(lines)


def _lookup(args: list[str]) -> tuple[OwnerCommand, list[str]] | None:
    words = [a.lower() for a in args[:2]]
    if len(words) == 2 and (command := ADMIN.get(" ".join(words))):
        return command, args[2:]
    command = ADMIN.get(words[0])
    return (command, args[1:]) if command else None


async def run_admin(ctx: CommandContext) -> CommandReply:
    """Dispatch ``/admin <subcommand> ...`` (the caller has checked that it is the owner)."""
    if not ctx.args:
        return CommandReply(admin_help())
    found = _lookup(ctx.args)
    if found is None:
        group = ctx.args[0].lower() + " "
        if any(name.startswith(group) for name in ADMIN):
            return CommandReply(admin_help(group))
        return CommandReply(f"No /admin {ctx.args[0]}. Send /admin for the list.")
    command, ctx.args = found
    arguments = list(ctx.args)
    outcome = "failed"
    try:
        if command.dm_only and not ctx.inbound.chat.is_dm:
            raise AdminError(f"/admin {command.name} works in your direct chat with me.")
        reply = await command.handler(ctx)
        outcome = "ok"
    except OWNER_ERRORS as exc:
        outcome = f"refused: {exc}"
        reply = CommandReply(str(exc))
    finally:
        await ctx.store.audit(
            ctx.inbound.sender.key, f"admin {command.name}", args=arguments, outcome=outcome
        )
    return reply
