"""Every slash command, declared once with its permission, served by every channel.

User commands are open to everyone (the owner too). Owner commands all live under ``/admin``
so none clashes with a user command of the same word. A non-owner who sends ``/admin`` gets
exactly the answer an unknown command gets, and ``/help`` never lists it to them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.access import Access
from bot.config import Config, check_timezone
from bot.events import Choice, Inbound
from bot.literal import literal, literal_line
from bot.store import ForgetOperation, Store
from partners.catalog import PartnerCatalog
from partners.checkins import Proactive
from partners.forgetting import ALL, ENTRY, HISTORY, ForgetInterrupted
from partners.memory import Entry, MemoryFile, UnreadableFile
from partners.persona import Partner
from partners.user_memory import UserMemory

if TYPE_CHECKING:
    from bot.admin_services import AdminServices

logger = logging.getLogger(__name__)

UNKNOWN = "Unknown command. Send /help to see what I understand."
OWNER_ASSISTANT_CHOICE = "assistant"


@dataclass(frozen=True)
class CommandReply:
    text: str
    choices: tuple[Choice, ...] = ()
    attachment: tuple[str, bytes] | None = None
    """A file sent with the reply: (file name, content)."""
    greet: str | None = None
    """A partner id: its greeting opens a conversation after this answer (``bot/greeter.py``)."""
    photo: bytes | None = None
    """A picture shown with the answer where the channel can (a partner's avatar)."""


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
    notify_owner: Callable[[str, str], Awaitable[None]]
    """(platform, text): a DM to the owner, as the gateway sends its notices."""
    bot_can_read_groups: bool | None = None
    partner: Partner | None = None
    """The partner of this DM (selected or default), for the user memory commands."""
    user_memory: UserMemory | None = None
    admin: AdminServices | None = None
    """What owner commands reach beyond this (memory, reviews, consults...); None elsewhere."""


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
    first_contact = ctx.partner is not None and not await ctx.store.count_sessions(
        ctx.chat_key, ctx.partner.id
    )
    return CommandReply(
        f"Hello! I'm a companion gateway. Partners here: {names}.\n"
        "Just write to start talking; /partner picks who you talk with, /new starts afresh.\n\n"
        + transparency_note(),
        greet=ctx.partner.id if first_contact and ctx.partner is not None else None,
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
    ended = await ctx.end_sessions(ctx.chat_key, "new")
    if ended:
        greet = ctx.partner.id if ctx.partner is not None else None
        return CommandReply("Started a new conversation. What's on your mind?", greet=greet)
    return CommandReply("This is already a new conversation.")


# ---- owner commands (/admin) -----------------------------------------------------------


async def admin(ctx: CommandContext) -> CommandReply:
    """Every ``/admin`` subcommand lives in bot/admin.py, which builds on this module's types;
    importing it here, when an owner command runs, keeps the two modules free of a cycle."""
    from bot.admin import run_admin

    return await run_admin(ctx)


# ---- what a partner keeps about you ----------------------------------------------------

SHARED_SCOPE_NOTE = (
    "{name} keeps one shared memory for everyone it talks with, and the owner manages it. "
    "Ask the owner if you want something removed."
)
NO_PARTNER = "You're not talking with a partner yet: pick one with /partner first."
CONFIRM = "confirm"


def _your_partner(ctx: CommandContext) -> tuple[Partner, UserMemory] | CommandReply:
    if ctx.partner is None or ctx.user_memory is None:
        return CommandReply(NO_PARTNER)
    if not ctx.partner.per_user:
        return CommandReply(SHARED_SCOPE_NOTE.format(name=ctx.partner.name))
    return ctx.partner, ctx.user_memory


async def memory(ctx: CommandContext) -> CommandReply:
    """Only the caller's own per-user entries: never anyone else's, never the owner's. The
    owner's own conversations shape the partner itself (DESIGN.md "Decisions": per-user
    writes), so the owner is shown the partner's own memory, whatever its scope."""
    if ctx.is_owner and ctx.partner is not None and ctx.user_memory is not None:
        return await _owner_memory(ctx.partner, ctx.user_memory, ctx.inbound.sender.key)
    found = _your_partner(ctx)
    if isinstance(found, CommandReply):
        return found
    partner, user_memory = found
    entries = await user_memory.entries(partner, ctx.inbound.sender.key)
    if not entries:
        return CommandReply(f"{partner.name} doesn't remember anything about you yet.")
    lines = [
        f"• {e.text} — {e.id or 'written by hand'}"
        + (f", {e.created:%Y-%m-%d}" if e.created else "")
        for e in entries
    ]
    return CommandReply(
        f"What {partner.name} remembers about you:\n"
        + "\n".join(lines)
        + "\n\n/forget <id> removes one entry, /forget all removes everything, "
        "/forget history removes your messages, /export sends you a copy."
    )


OWNER_MEMORY_FILES = (
    ("MEMORY.md", "its own memory"),
    ("USER.md", "what it knows about the people it talks with"),
)


async def _owner_memory(partner: Partner, user_memory: UserMemory, owner_key: str) -> CommandReply:
    """What the partner keeps from the owner's conversations, file by file, as literal text
    (the model wrote it)."""
    sections: list[str] = []
    for name, meaning in OWNER_MEMORY_FILES:
        entries = await user_memory.memory.entries(MemoryFile(partner.dir, name))
        if entries:
            sections.append(f"In {name} ({meaning}):\n" + _entry_lines(entries))
    if partner.per_user and (own := await user_memory.entries(partner, owner_key)):
        sections.append("In your own file:\n" + _entry_lines(own))
    if not sections:
        return CommandReply(
            f"{partner.name} keeps nothing from your conversations yet. As the owner, what you "
            "tell it goes to its own memory (MEMORY.md), which shapes it for everyone."
        )
    return CommandReply(
        f"What {partner.name} keeps from your conversations (as the owner, what you tell it "
        "goes to its own memory and shapes it for everyone):\n\n"
        + "\n\n".join(sections)
        + f"\n\n/admin forget {partner.id} <id> removes one entry; "
        f"/admin memory {partner.id} shows the whole file."
    )


def _entry_lines(entries: list[Entry]) -> str:
    return "\n".join(
        f"• {literal(e.text)} — {e.id or 'written by hand'}"
        + (f", {e.created:%Y-%m-%d}" if e.created else "")
        for e in entries
    )


async def forget(ctx: CommandContext) -> CommandReply:
    found = _your_partner(ctx)
    if isinstance(found, CommandReply):
        return found
    partner, user_memory = found
    if not ctx.args:
        return CommandReply("Usage: /forget <entry id> | /forget all | /forget history")
    what = ctx.args[0]
    kind = what.lower() if what.lower() in (ALL, HISTORY) else ENTRY
    confirmed = len(ctx.args) > 1 and ctx.args[1].lower() == CONFIRM
    if kind != ENTRY and not confirmed:
        scope = (
            "everything it remembers about you and the diary passages from your conversations"
            if kind == ALL
            else "your messages and its replies to you from its history and search"
        )
        command = f"/forget {kind} {CONFIRM}"
        return CommandReply(
            f"This makes {partner.name} forget {scope}. It cannot be undone. "
            f"Send {command} to go ahead.",
            (Choice("Yes, forget it", command),),
        )
    try:
        operation = await user_memory.forget(
            partner,
            ctx.inbound.sender.key,
            kind,
            entry_id=what if kind == ENTRY else None,
            request=request_key(ctx.inbound),
        )
    except (UnreadableFile, ForgetInterrupted) as exc:
        return await _forget_failed(ctx, partner, exc)
    if operation is None:
        return CommandReply(f"You have no entry {what!r}. Send /memory to see the ids.")
    return CommandReply(forget_answer(partner, operation))


def request_key(inbound: Inbound) -> str:
    """Which platform message asked: the same command delivered again has the same key."""
    return f"{inbound.chat.platform}:{inbound.chat.chat_id}:{inbound.message_id}"


def forget_answer(partner: Partner, operation: ForgetOperation) -> str:
    """What a finished operation tells the user: its counts, taken before anything went, so
    a command delivered again after a crash answers the same."""
    if operation.kind == ENTRY:
        entries = ", ".join(operation.entry_ids)
        return f"Forgotten: entry {entries} is gone from {partner.name}'s memory, diary and search."
    if operation.kind == HISTORY:
        return f"Done: {operation.messages} messages are gone from {partner.name}'s history."
    if not operation.entries and not operation.passages:
        return f"{partner.name} kept no entries or diary passages about you: nothing to forget."
    return (
        f"Done: {operation.entries} entries and {operation.passages} diary passages "
        f"are gone. {partner.name} will start afresh with you."
    )


FORGET_NOTICE_EVERY_SECONDS = 600


async def _forget_failed(
    ctx: CommandContext, partner: Partner, exc: UnreadableFile | ForgetInterrupted
) -> CommandReply:
    """A file that cannot be read or written: nothing stored is lost (an unreadable file is
    never rewritten; a started operation stays recorded). The owner gets an audit row and,
    at most every ten minutes per user, a DM; the user is told what happened."""
    user_key = ctx.inbound.sender.key
    told_recently = [
        row
        for row in await ctx.store.audit_rows("forget_failed", limit=50)
        if row["actor"] == user_key
        and row["detail"].get("partner") == partner.id
        and time.time() - row["time"] < FORGET_NOTICE_EVERY_SECONDS
    ]
    await ctx.store.audit(user_key, "forget_failed", partner=partner.id, error=str(exc))
    owner_text, user_text = _forget_failure_texts(exc, user_key, partner)
    if not told_recently:
        await ctx.notify_owner(ctx.inbound.chat.platform, owner_text)
    return CommandReply(user_text)


def _forget_failure_texts(
    exc: UnreadableFile | ForgetInterrupted, user_key: str, partner: Partner
) -> tuple[str, str]:
    """(what the owner is told, what the user is told)."""
    who, problem = literal_line(user_key), literal_line(str(exc))
    if isinstance(exc, UnreadableFile):
        return (
            f"/forget from {who} with {partner.id} could not run: {problem} "
            f"({literal_line(str(exc.path))}). The user was told; nothing was deleted.",
            f"I couldn't do that: a file where {partner.name} keeps its memories was edited by "
            "hand and is not readable text (not UTF-8). Nothing was deleted or changed. The "
            "owner has been told; once it is repaired, send the command again.",
        )
    return (
        f"/forget from {who} with {partner.id} could not finish: {problem}. It is recorded "
        "and finishes on the next start or the user's next /forget.",
        "I couldn't finish forgetting: the server could not change a file. What I started is "
        "recorded and will be finished (at the latest when I restart). The owner has been told.",
    )


async def export(ctx: CommandContext) -> CommandReply:
    found = _your_partner(ctx)
    if isinstance(found, CommandReply):
        return found
    partner, user_memory = found
    name, data = await user_memory.export(partner, ctx.inbound.sender.key)
    return CommandReply(
        f"Everything {partner.name} keeps about you: export.json (all of it) and summary.md.",
        attachment=(name, data),
    )


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
    """``/voice on|off|auto``: whether replies to this user are spoken (bot/voice_replies.py)."""
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


USER_MEMORY_COMMANDS = (
    Command("memory", "", "what your partner remembers about you", memory, dm_only=True),
    Command("forget", "<id>|all|history", "make it forget", forget, dm_only=True),
    Command("export", "", "a copy of everything kept about you", export, dm_only=True),
    Command("checkins", "on|off", "let your partner write first", checkins, dm_only=True),
    Command("timezone", "<Area/City>", "your time zone", timezone, dm_only=True),
    Command("voice", "on|off|auto", "answer by voice message", voice, dm_only=True),
)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command("start", "", "what this bot is", start),
        Command("help", "", "this list", help_command),
        Command("partner", "[id]", "choose who you talk with", partner, dm_only=True),
        Command("new", "", "start a new conversation", new),
        *USER_MEMORY_COMMANDS,
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


def is_user_command(name: str) -> bool:
    """Whether ``name`` is a command anyone may use. Typed in a group without naming the bot,
    only these are meant for it: an unknown word, or ``/admin``, is chatter kept as context
    (perhaps another bot's command), so a non-owner's /admin meets the same silence as any
    unknown command and learns nothing. The owner's commands run wherever the owner types
    them (the gateway checks that)."""
    command = COMMANDS.get(name.lower())
    return command is not None and not command.owner_only


def parse_command(text: str, bot_username: str | None = None) -> tuple[str, list[str]] | None:
    """``/name@bot arg1 arg2`` -> (name, args); None if the text is not a command for us."""
    if not text.startswith("/") or len(text) < 2:
        return None
    head, *args = text[1:].split()
    name, _, target = head.partition("@")
    if target and bot_username and target.lower() != bot_username.lower():
        return None
    return name.lower(), args
