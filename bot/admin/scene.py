"""``/admin scene [pause|resume]`` in a group: its cast (the partners bound there, in the order
they answer) and the scene's settings, with the tokens its scene spent today against its daily
budget (``bot/gateway/scene_costs.py``); pausing stores an override in the store's settings, so it
holds on every worker and across restarts (``bot/gateway/scenes.py`` says what a pause does)."""

from __future__ import annotations

from bot.admin.args import AdminError
from bot.commands.types import CommandContext, CommandReply
from bot.gateway.scene_costs import SceneCosts, group_of
from bot.gateway.scenes import is_paused, paused_key
from bot.text.literal import literal_line
from partners.persona import Partner

USAGE = "Usage: /admin scene [pause|resume]"


async def admin_scene(ctx: CommandContext) -> CommandReply:
    chat = ctx.inbound.chat
    if chat.is_dm:
        raise AdminError("Send /admin scene inside the group whose scene you mean.")
    action = ctx.args[0].lower() if ctx.args else "show"
    if action not in ("show", "pause", "resume") or len(ctx.args) > 1:
        raise AdminError(USAGE)
    key = paused_key(chat.platform, chat.chat_id)
    if action == "pause":
        await ctx.store.put_setting(key, ctx.inbound.sender.key)
    elif action == "resume":
        await ctx.store.delete_setting(key)
    return CommandReply(await _describe(ctx, action))


async def _describe(ctx: CommandContext, action: str) -> str:
    chat = ctx.inbound.chat
    rows = await ctx.store.bindings(chat.platform, chat.chat_id)
    cast = [(row["partner_id"], await ctx.catalog.find(row["partner_id"])) for row in rows]
    names = [literal_line(p.name if p else f"{pid} (not loaded)") for pid, p in cast]
    paused = await is_paused(ctx.store, chat.platform, chat.chat_id)
    settings = ctx.config.scene
    lines = {
        "pause": ["The scene is paused."],
        "resume": ["The scene goes on."],
        "show": [],
    }[action]
    lines.append("Cast: " + (", ".join(names) if names else "nobody (bind with /admin bind)"))
    if len(names) < 2:
        lines.append("One partner is no scene: it answers what is addressed to it.")
    state = (
        "paused (one partner answers each message; partners never hand each other the turn)"
        if paused
        else "on"
    )
    lines += [
        f"Scene: {state}",
        f"max_partner_turns = {settings.max_partner_turns}",
        f"max_turns_per_partner = {settings.max_turns_per_partner}",
        f"max_unaddressed_per_hour = {settings.max_unaddressed_per_hour}",
        f"gate_calls_per_hour = {settings.gate_calls_per_hour}",
        await _budget_line(ctx, [p for _, p in cast if p is not None]),
    ]
    return "\n".join(lines)


async def _budget_line(ctx: CommandContext, cast: list[Partner]) -> str:
    """The group's daily token budget and what its scene spent today, on its calendar."""
    costs = SceneCosts(ctx.config, ctx.store)
    chat = ctx.inbound.chat
    spent = await costs.spent_today(group_of(chat.platform, chat.chat_id), cast)
    budget = ctx.config.scene.daily_token_budget
    limit = f"{budget}" if budget else "0 (no budget)"
    today = f"spent on {costs.day(cast)} ({costs.zone(cast)}): {spent} tokens"
    if budget and spent >= budget:
        today += " — used up: the partners answer only what is addressed to them"
    return f"daily_token_budget = {limit}; {today}"
