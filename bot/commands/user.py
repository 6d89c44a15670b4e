"""The user commands' handlers: ``/start``, ``/help``, ``/partner``, ``/new``, ``/checkins``,
``/timezone`` and ``/voice`` (declared in ``bot/commands/table.py``; the memory commands live in
``bot/commands/memory.py``)."""

from __future__ import annotations

import asyncio

from bot.commands.memory import NO_PARTNER
from bot.commands.table import help_text, transparency_note
from bot.commands.types import CommandContext, CommandReply
from bot.config.access import check_timezone
from bot.events import Choice
from partners.checkins import Proactive
from partners.greetings import greetings_of

OWNER_ASSISTANT_CHOICE = "assistant"


async def start(ctx: CommandContext) -> CommandReply:
    partners = ctx.catalog.public()
    names = ", ".join(p.name for p in partners) or "no partners yet"
    first_contact = ctx.partner is not None and not await ctx.store.count_sessions(
        ctx.chat_key, ctx.partner.id
    )
    note = "" if ctx.is_owner else "\n\n" + transparency_note()  # about the owner, for users
    return CommandReply(
        f"Hello! I'm a companion gateway. Partners here: {names}.\n"
        "Just write to start talking; /partner picks who you talk with, /new starts afresh." + note,
        greet=ctx.partner.id if first_contact and ctx.partner is not None else None,
    )


async def help_command(ctx: CommandContext) -> CommandReply:
    return CommandReply(help_text(ctx.is_owner))


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
    photo = chosen.avatar_image
    if open_session is not None:
        return CommandReply(f"You're talking with {chosen.name} again.", photo=photo)
    return CommandReply(
        f"You're now talking with {chosen.name}. Say hello!", greet=chosen.id, photo=photo
    )


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
    """End the open conversation. A partner with a card greeting opens the new one with it
    even when none was open (the first ``/new`` of a console, whose conversation has not
    begun): the greeting is the new conversation's start."""
    ended = await ctx.end_sessions(ctx.chat_key, "new")
    partner = ctx.partner
    greets = partner is not None and bool(await asyncio.to_thread(greetings_of, partner))
    if ended or greets:
        greet = partner.id if partner is not None else None
        return CommandReply("Started a new conversation. What's on your mind?", greet=greet)
    return CommandReply("This is already a new conversation.")


async def checkins(ctx: CommandContext) -> CommandReply:
    """Opt in or out of check-ins from the partner of this DM (off until the user says on)."""
    if ctx.partner is None:
        return CommandReply(NO_PARTNER)
    user_key = ctx.inbound.sender.key
    choice = ctx.args[0].lower() if ctx.args else ""
    sends = Proactive.of(ctx.partner).enabled
    if choice not in ("on", "off"):
        setting = await ctx.store.checkin_setting(ctx.partner.id, user_key)
        state = "on" if setting and setting["enabled"] else "off"
        if not sends:
            return CommandReply(
                f"{_never_first(ctx)} Your choice is {state}. Usage: /checkins on|off"
            )
        return CommandReply(
            f"Check-ins from {ctx.partner.name} are {state}. Usage: /checkins on|off"
        )
    await ctx.store.set_checkins(ctx.partner.id, user_key, choice == "on")
    if choice == "off":
        return CommandReply(f"{ctx.partner.name} won't write first any more.")
    if not sends:
        return CommandReply(
            f"{_never_first(ctx)} Your choice is saved: if they are turned on, "
            f"{ctx.partner.name} may write to you now and then. /checkins off takes it back."
        )
    user = await ctx.store.user(user_key)
    zone = (user["timezone"] if user else None) or "the partner's time zone"
    return CommandReply(
        f"{ctx.partner.name} may now write to you now and then (never at night, in {zone}; "
        "set yours with /timezone Area/City). /checkins off stops it."
    )


def _never_first(ctx: CommandContext) -> str:
    """The truth when the partner's preset.yml has check-ins off: it never writes first."""
    assert ctx.partner is not None
    line = (
        f"{ctx.partner.name} does not write first: check-ins are turned off in its settings "
        "(proactive in its preset.yml)."
    )
    if ctx.is_owner:
        line += f" Turn them on with /admin partner set {ctx.partner.id} proactive.enabled true."
    return line


async def timezone(ctx: CommandContext) -> CommandReply:
    if not ctx.args:
        user = await ctx.store.user(ctx.inbound.sender.key)
        current = (user["timezone"] if user else None) or "not set (the partner's is used)"
        return CommandReply(f"Your time zone: {current}. Usage: /timezone Europe/Lisbon")
    try:
        check_timezone(ctx.args[0])
    except ValueError as exc:
        return CommandReply(str(exc))
    await ctx.store.set_user_timezone(ctx.inbound.sender.key, ctx.args[0])
    return CommandReply(f"Time zone set to {ctx.args[0]}.")


VOICE_MODES = {
    "on": "I'll answer you with voice messages (and their text).",
    "off": "I'll answer you in text only.",
    "auto": "I'll answer with a voice message when you send me one, and in text otherwise.",
}


async def voice(ctx: CommandContext) -> CommandReply:
    """``/voice on|off|auto``: whether replies to this user are spoken
    (bot/turn/voice_replies.py)."""
    user_key = ctx.inbound.sender.key
    choice = ctx.args[0].lower() if ctx.args else ""
    if not ctx.config.speech.tts_model:
        return CommandReply(
            "Voice replies are not set up here (the owner sets speech.tts_model); I answer in text."
        )
    if choice not in VOICE_MODES:
        current = await ctx.store.voice_mode(user_key) or "auto"
        return CommandReply(
            f"Voice replies: {current}. {VOICE_MODES[current]}\nUsage: /voice on|off|auto"
        )
    await ctx.store.set_voice_mode(user_key, choice)
    return CommandReply(f"Voice replies: {choice}. {VOICE_MODES[choice]}")
