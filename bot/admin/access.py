"""Owner commands about who may talk where: pairing codes, allow/block, bound groups."""

from __future__ import annotations

from bot.admin.args import need, user_key_arg
from bot.commands.types import CommandContext, CommandReply
from bot.gateway.access import APPROVED_WELCOME, AccessError
from bot.text.literal import literal_line


async def admin_approve(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "approve <code>")
    user_key = await ctx.access.approve(ctx.args[0])
    if await ctx.store.take_announcement(ctx.args[0].upper()):
        await ctx.notify_user(user_key, APPROVED_WELCOME)
    return CommandReply(f"Approved {user_key}.")


async def admin_deny(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "deny <code>")
    user_key = await ctx.access.deny(ctx.args[0])
    return CommandReply(f"Refused the request from {user_key}.")


async def admin_pending(ctx: CommandContext) -> CommandReply:
    rows = await ctx.store.live_pairings()
    if not rows:
        return CommandReply("No pairing requests are waiting.")
    lines = []
    for row in rows:
        user = await ctx.store.user(row["user_key"])
        name = literal_line(user["display_name"] if user and user["display_name"] else "?")
        lines.append(f"{row['code']} — {name} ({literal_line(row['user_key'])})")
    return CommandReply("Waiting for approval:\n" + "\n".join(lines))


async def _set_access(ctx: CommandContext, access: str, verb: str) -> CommandReply:
    need(ctx, 1, f"{verb} <platform:user id>")
    key = user_key_arg(ctx, ctx.args[0])
    if not await ctx.store.set_user_access(key, access):
        raise AccessError(f"I have never seen user {key}; they need to write to me first")
    return CommandReply(f"{key} is now {access}.")


async def admin_allow(ctx: CommandContext) -> CommandReply:
    return await _set_access(ctx, "allowed", "allow")


async def admin_block(ctx: CommandContext) -> CommandReply:
    return await _set_access(ctx, "blocked", "block")


async def admin_bind(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "bind <partner id>")
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
    if chat.is_dm:
        raise AccessError("Send /admin unbind inside the group or channel to unbind it.")
    partner_id = ctx.args[0] if ctx.args else None
    removed = await ctx.store.unbind(chat.platform, chat.chat_id, partner_id)
    if not removed and partner_id is not None and ctx.catalog.get(partner_id) is None:
        ctx.catalog.require(partner_id)  # says there is no such partner
    config_bound = [
        b for b in await ctx.store.bindings(chat.platform, chat.chat_id) if b["source"] == "config"
    ]
    text = f"Unbound {removed} partner(s) here."
    if config_bound:
        names = ", ".join(b["partner_id"] for b in config_bound)
        text += f" {names} stay bound: that binding is in config.toml; remove it there."
    return CommandReply(text)
