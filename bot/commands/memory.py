"""The commands about what a partner keeps about you: ``/memory``, ``/forget`` and ``/export``
(docs/architecture.md "Decisions": per-user memory). A user sees and removes only their own
entries; the owner is shown the partner's own memory, which their conversations shape."""

from __future__ import annotations

import time

from bot.commands.types import CommandContext, CommandReply
from bot.events import Choice, Inbound
from bot.store import ForgetOperation
from bot.text.literal import literal, literal_line
from partners.forgetting import ALL, ENTRY, HISTORY, ForgetInterrupted
from partners.memory import MemoryFile
from partners.memory_errors import UnreadableFile
from partners.memory_format import Entry
from partners.persona import Partner
from partners.user_memory import UserMemory

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
    owner's own conversations shape the partner itself (docs/architecture.md "Decisions": per-user
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
