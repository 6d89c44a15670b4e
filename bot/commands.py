"""Every slash command, declared once with its permission, served by every channel.

User commands are open to everyone (the owner too). Owner commands all live under ``/admin``
so none clashes with a user command of the same word. A non-owner who sends ``/admin`` gets
exactly the answer an unknown command gets, and ``/help`` never lists it to them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.access import Access, AccessError
from bot.config import Config
from bot.events import Choice, Inbound
from bot.store import Store
from partners.catalog import PartnerCatalog
from partners.persona import PartnerError

logger = logging.getLogger(__name__)

UNKNOWN = "Unknown command. Send /help to see what I understand."
OWNER_ASSISTANT_CHOICE = "assistant"


@dataclass(frozen=True)
class CommandReply:
    text: str
    choices: tuple[Choice, ...] = ()


@dataclass
class CommandContext:
    """What a command may use; built by the gateway for one message."""

    config: Config
    store: Store
    catalog: PartnerCatalog
    access: Access
    inbound: Inbound
    chat_key: str
    is_owner: bool
    args: list[str]
    end_sessions: Callable[[str, str], Awaitable[list[str]]]
    notify_user: Callable[[str, str], Awaitable[None]]
    bot_can_read_groups: bool | None = None


Handler = Callable[[CommandContext], Awaitable[CommandReply]]


@dataclass(frozen=True)
class Command:
    name: str
    usage: str
    help: str
    handler: Handler
    owner_only: bool = False
    dm_only: bool = False


def transparency_note(owner_can_read: bool = True) -> str:
    lines = [
        "Good to know: this companion runs on its owner's own server.",
        "The owner can read conversations and what the partner remembers about you."
        if owner_can_read
        else "",
        "Send /memory to see what it remembers about you and /forget to delete it.",
    ]
    return "\n".join(line for line in lines if line)


# ---- user commands ---------------------------------------------------------------------


async def start(ctx: CommandContext) -> CommandReply:
    partners = ctx.catalog.public()
    names = ", ".join(p.name for p in partners) or "no partners yet"
    return CommandReply(
        f"Hello! I'm a companion gateway. Partners here: {names}.\n"
        "Just write to start talking; /partner picks who you talk with, /new starts afresh.\n\n"
        + transparency_note()
    )


async def help_command(ctx: CommandContext) -> CommandReply:
    return CommandReply(help_text(ctx.is_owner))


def help_text(is_owner: bool) -> str:
    lines = [
        f"/{c.name} {c.usage}".rstrip() + f" — {c.help}"
        for c in COMMANDS.values()
        if not c.owner_only
    ]
    if is_owner:
        lines.append("/admin — owner commands (send /admin for the list)")
    return "\n".join(lines) + "\n\n" + transparency_note()


async def partner(ctx: CommandContext) -> CommandReply:
    if not ctx.args:
        return _partner_menu(ctx)
    wanted = ctx.args[0].lower()
    if ctx.is_owner and wanted == OWNER_ASSISTANT_CHOICE:
        await ctx.store.select_partner(ctx.chat_key, None)
        await ctx.end_sessions(ctx.chat_key, "partner changed")
        return CommandReply("You're talking with your assistant now.")
    chosen = ctx.catalog.get(wanted)
    if chosen is None or (not chosen.preset.public and not ctx.is_owner):
        return CommandReply(f"There is no partner {wanted!r}.", _partner_menu(ctx).choices)
    await ctx.store.select_partner(ctx.chat_key, chosen.id)
    open_session = await ctx.store.open_session(ctx.chat_key, chosen.id)
    await ctx.end_sessions(ctx.chat_key, "partner changed")
    if open_session is not None:
        return CommandReply(f"You're talking with {chosen.name} again.")
    return CommandReply(f"You're now talking with {chosen.name}. Say hello!")


def _partner_menu(ctx: CommandContext) -> CommandReply:
    partners = ctx.catalog.all() if ctx.is_owner else ctx.catalog.public()
    choices = [Choice(p.name, f"/partner {p.id}") for p in partners]
    if ctx.is_owner:
        choices.append(Choice("Assistant", f"/partner {OWNER_ASSISTANT_CHOICE}"))
    lines = [f"• {p.name} ({p.id}) — {p.preset.description}".rstrip(" —") for p in partners]
    text = "Who would you like to talk with?\n" + "\n".join(lines)
    if not partners:
        text = "There are no partners yet."
    return CommandReply(text + "\n\nSend /partner <id> to choose.", tuple(choices))


async def new(ctx: CommandContext) -> CommandReply:
    ended = await ctx.end_sessions(ctx.chat_key, "new")
    if ended:
        return CommandReply("Started a new conversation. What's on your mind?")
    return CommandReply("This is already a new conversation.")


# ---- owner commands (/admin) -----------------------------------------------------------


async def admin(ctx: CommandContext) -> CommandReply:
    if not ctx.args:
        lines = [f"/admin {c.name} {c.usage}".rstrip() + f" — {c.help}" for c in ADMIN.values()]
        return CommandReply("Owner commands:\n" + "\n".join(lines))
    sub = ADMIN.get(ctx.args[0].lower())
    if sub is None:
        return CommandReply(f"No /admin {ctx.args[0]}. Send /admin for the list.")
    ctx.args = ctx.args[1:]
    await ctx.store.audit(ctx.inbound.sender.key, f"admin {sub.name}", args=ctx.args)
    try:
        return await sub.handler(ctx)
    except (AccessError, PartnerError) as exc:
        return CommandReply(str(exc))


def _need(ctx: CommandContext, count: int, usage: str) -> None:
    if len(ctx.args) < count:
        raise AccessError(f"Usage: /admin {usage}")


async def admin_partners(ctx: CommandContext) -> CommandReply:
    cards = []
    for p in ctx.catalog.all():
        bound = [b for b in await ctx.store.bindings() if b["partner_id"] == p.id]
        visibility = "public" if p.preset.public else "hidden"
        cards.append(
            f"{p.name} ({p.id}) — {p.preset.description or 'no description'}\n"
            f"  memory: {p.preset.memory_scope}, {visibility}, bound chats: {len(bound)}"
        )
    for partner_id, error in ctx.catalog.errors.items():
        cards.append(f"{partner_id}: NOT LOADED — {error}")
    return CommandReply("\n".join(cards) or "No partners yet: /admin partner new <id>")


async def admin_approve(ctx: CommandContext) -> CommandReply:
    _need(ctx, 1, "approve <code>")
    user_key = await ctx.access.approve(ctx.args[0])
    await ctx.notify_user(user_key, "You're in! The owner approved you. Say hello.")
    return CommandReply(f"Approved {user_key}.")


async def admin_deny(ctx: CommandContext) -> CommandReply:
    _need(ctx, 1, "deny <code>")
    user_key = await ctx.access.deny(ctx.args[0])
    return CommandReply(f"Refused the request from {user_key}.")


async def admin_pending(ctx: CommandContext) -> CommandReply:
    rows = await ctx.store.live_pairings()
    if not rows:
        return CommandReply("No pairing requests are waiting.")
    lines = []
    for row in rows:
        user = await ctx.store.user(row["user_key"]) or {}
        lines.append(f"{row['code']} — {user.get('display_name', '?')} ({row['user_key']})")
    return CommandReply("Waiting for approval:\n" + "\n".join(lines))


async def _set_access(ctx: CommandContext, access: str, verb: str) -> CommandReply:
    _need(ctx, 1, f"{verb} <platform:user id>")
    key = ctx.args[0] if ":" in ctx.args[0] else f"{ctx.inbound.chat.platform}:{ctx.args[0]}"
    if not await ctx.store.set_user_access(key, access):
        raise AccessError(f"I have never seen user {key}; they need to write to me first")
    return CommandReply(f"{key} is now {access}.")


async def admin_allow(ctx: CommandContext) -> CommandReply:
    return await _set_access(ctx, "allowed", "allow")


async def admin_block(ctx: CommandContext) -> CommandReply:
    return await _set_access(ctx, "blocked", "block")


async def admin_bind(ctx: CommandContext) -> CommandReply:
    _need(ctx, 1, "bind <partner id>")
    chat = ctx.inbound.chat
    if chat.is_dm:
        raise AccessError("Send /admin bind inside the group or channel the partner should join.")
    chosen = ctx.catalog.require(ctx.args[0])
    added = await ctx.store.bind(chat.platform, chat.chat_id, chosen.id, "command")
    text = f"{chosen.name} now answers here." if added else f"{chosen.name} was already bound here."
    if ctx.bot_can_read_groups is False:
        text += (
            "\nNote: Telegram privacy mode is on for this bot, so only messages that mention "
            "me or reply to me reach the partner. To let it follow the whole conversation, "
            "send /setprivacy to @BotFather, choose this bot and pick Disable, then re-add me."
        )
    return CommandReply(text)


async def admin_unbind(ctx: CommandContext) -> CommandReply:
    chat = ctx.inbound.chat
    partner_id = ctx.args[0] if ctx.args else None
    removed = await ctx.store.unbind(chat.platform, chat.chat_id, partner_id)
    config_bound = [
        b for b in await ctx.store.bindings(chat.platform, chat.chat_id) if b["source"] == "config"
    ]
    text = f"Unbound {removed} partner(s) here."
    if config_bound:
        names = ", ".join(b["partner_id"] for b in config_bound)
        text += f" {names} stay bound: that binding is in config.toml; remove it there."
    return CommandReply(text)


ADMIN: dict[str, Command] = {
    c.name: c
    for c in (
        Command("partners", "", "list partners", admin_partners, owner_only=True),
        Command("approve", "<code>", "let a pairing user in", admin_approve, owner_only=True),
        Command("deny", "<code>", "refuse a pairing request", admin_deny, owner_only=True),
        Command("pending", "", "pairing requests waiting", admin_pending, owner_only=True),
        Command("allow", "<user>", "allow a user", admin_allow, owner_only=True),
        Command("block", "<user>", "block a user", admin_block, owner_only=True),
        Command("bind", "<partner>", "bind a partner to this group", admin_bind, owner_only=True),
        Command("unbind", "[partner]", "unbind partners here", admin_unbind, owner_only=True),
    )
}


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("start", "", "what this bot is", start),
        Command("help", "", "this list", help_command),
        Command("partner", "[id]", "choose who you talk with", partner, dm_only=True),
        Command("new", "", "start a new conversation", new),
        Command("admin", "<command>", "owner commands", admin, owner_only=True),
    )
}


async def run_command(ctx: CommandContext, name: str) -> CommandReply:
    """Run a command, answering an unknown one — or /admin from a non-owner — the same way."""
    command = COMMANDS.get(name)
    if command is None or (command.owner_only and not ctx.is_owner):
        return CommandReply(UNKNOWN)
    if command.dm_only and not ctx.inbound.chat.is_dm:
        return CommandReply(f"/{name} works in a direct message with me.")
    return await command.handler(ctx)


def parse_command(text: str, bot_username: str | None = None) -> tuple[str, list[str]] | None:
    """``/name@bot arg1 arg2`` -> (name, args); None if the text is not a command for us."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, *args = text[1:].split()
    name, _, target = head.partition("@")
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name.lower(), args
