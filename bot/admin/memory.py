"""Owner commands about memory and conversations: read and edit memories, journals, reviews,
undo, consults, referenced transcripts and the list of sessions.

``/admin memory`` is administration: any partner's memory and the owner's own. It is not the user
command ``/memory``, which shows anyone — the owner too — what the current partner keeps about
them. Forgetting here is forgetting (docs/architecture.md "Decisions"): the entry's text leaves the
file, the journals and the changelog, ``/admin undo`` cannot bring it back, and its tombstone
(``file:<name>``, see :mod:`partners.forgetting`) keeps a review from writing it back."""

from __future__ import annotations

import re
import time
from datetime import date, datetime, tzinfo

from bot.admin.args import AdminError, need, services, user_key_arg
from bot.commands.paging import paged, pop_page
from bot.commands.types import CommandContext, CommandReply
from bot.store import MessageRow, SessionRow, Store
from bot.text.literal import literal, literal_line
from bot.turn.sessions import OWNER_AUDIENCE, Speaker
from bot.turn.transcripts import MAX_REFERENCES, transcript_label
from partners.changelog import Change
from partners.journal import forget_in_journals, journal_file, journal_files
from partners.memory import MemoryFile, MemoryStore
from partners.memory_format import text_hash
from partners.memory_undo import undo
from partners.persona import Partner
from partners.review import ReviewResult
from partners.tombstones import file_key
from partners.tools import user_memory_file

ENTRY_ID = re.compile(r"^m_[0-9a-z]+$")
CHANGE_ID = re.compile(r"^c_[0-9a-z]+$")
SESSION_PREFIX = re.compile(r"^[0-9a-f]{6,32}$")
CHAT_MARKER = re.compile(r"\s*<!--\s*chat:.*?-->")
SHORT_ID = 8
RECENT_DAYS = 7


# ---- reading and editing memory -----------------------------------------------------------


async def admin_memory(ctx: CommandContext) -> CommandReply:
    page = pop_page(ctx.args)
    command = " ".join(["/admin memory", *ctx.args])
    if not ctx.args:
        owner = await services(ctx).memory.read(services(ctx).owner_file)
        text = "Your memory (every partner reads it, none writes it):\n" + _body(owner)
        return paged(
            text + "\n\nAdd: /admin remember <text> · remove: /admin forget <id>", command, page
        )
    partner = ctx.catalog.require(ctx.args[0])
    if len(ctx.args) > 1:
        key = user_key_arg(ctx, ctx.args[1])
        text = await services(ctx).memory.read(user_memory_file(partner, key))
        return paged(f"What {partner.name} keeps about {key}:\n" + _body(text), command, page)
    own = await services(ctx).memory.read(MemoryFile(partner.dir, "MEMORY.md"))
    users = await _user_files(services(ctx).memory, partner)
    lines = [f"{partner.name}'s own memory (MEMORY.md):", _body(own), ""]
    if users:
        lines.append(f"Per-user files ({len(users)}): " + ", ".join(users))
        lines.append(f"Show one: /admin memory {partner.id} <platform:user id>")
    lines.append(f"Remove an entry: /admin forget {partner.id} <id>")
    return paged("\n".join(lines), command, page)


def _body(text: str) -> str:
    """A memory file as it is on disk: what the model or a user wrote shows literally."""
    return literal(text.strip()) or "(empty)"


async def _user_files(memory: MemoryStore, partner: Partner) -> list[str]:
    names = await memory.documents.names(partner.dir, "users")
    return [n.removeprefix("users/").removesuffix(".md") for n in names if n.endswith(".md")]


async def admin_remember(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "remember <text>")
    result = await services(ctx).memory.add(
        services(ctx).owner_file,
        " ".join(ctx.args),
        reason="remembered by the owner",
        source="/admin remember",
    )
    if result.duplicate:
        return CommandReply(f"Already in your memory (entry {result.entry_id or 'by hand'}).")
    return CommandReply(f"Remembered (entry {result.entry_id}). Every partner can read it.")


async def admin_forget(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "forget <entry id> (yours) or forget <partner> <entry id>")
    tools = services(ctx)
    if len(ctx.args) == 1:
        files, whose = [tools.owner_file], "your memory"
        entry_id, tombstone_partner = ctx.args[0], ""
    else:
        partner = ctx.catalog.require(ctx.args[0])
        files = await _partner_memory_files(services(ctx).memory, partner)
        whose, entry_id = f"{partner.name}'s memory", ctx.args[1]
        tombstone_partner = partner.id
    if not ENTRY_ID.match(entry_id):
        raise AdminError(f"{entry_id!r} is not an entry id; ids look like m_18c2f0a1b2c3d")
    for file in files:
        found = [e for e in await tools.memory.entries(file) if e.id == entry_id]
        if found:
            # the tombstone first: nothing that writes memory from outside a conversation (a
            # review, files read into the database) may write the text back afterwards
            forgotten = {text_hash(found[0].text)}
            await ctx.store.add_tombstones(tombstone_partner, file_key(file.name), forgotten)
            entry = await tools.memory.forget_entry(file, entry_id, source="/admin forget")
            await tools.memory.scrub_changelog(
                file.root, file.name, entry_ids={entry_id}, texts={entry.text}
            )
            await forget_in_journals(
                tools.memory,
                file.root,
                texts={entry.text},
                user_key=None,
                whole_entries=False,
                source="/admin forget",
            )
            return CommandReply(
                f"Forgotten: “{literal(entry.text)}” ({file.name}). This cannot be undone."
            )
    raise AdminError(f"no entry {entry_id} in {whose}; /admin memory shows the ids")


async def _partner_memory_files(memory: MemoryStore, partner: Partner) -> list[MemoryFile]:
    names = ["MEMORY.md", "USER.md", "IDENTITY.md", "SOUL.md"]
    users = await memory.documents.names(partner.dir, "users")
    names += [name for name in users if name.endswith(".md")]
    return [MemoryFile(partner.dir, name) for name in names]


async def admin_journal(ctx: CommandContext) -> CommandReply:
    page = pop_page(ctx.args)
    need(ctx, 1, "journal <partner> [YYYY-MM-DD]")
    partner = ctx.catalog.require(ctx.args[0])
    zone = partner.timezone(ctx.config.owner_timezone())
    day = ctx.args[1] if len(ctx.args) > 1 else datetime.now(zone).date().isoformat()
    try:
        date.fromisoformat(day)
    except ValueError:
        raise AdminError(f"{day!r} is not a date; write it as YYYY-MM-DD") from None
    text = await services(ctx).memory.read(journal_file(partner, day))
    if not text.strip():
        days = [
            f.name.removeprefix("memory/").removesuffix(".md")
            for f in await journal_files(services(ctx).memory, partner.dir)
        ]
        recent = ", ".join(days[-RECENT_DAYS:]) or "none yet"
        return CommandReply(f"{partner.name} has no journal for {day}. Recent days: {recent}")
    journal = literal(CHAT_MARKER.sub("", text).strip())
    return paged(journal, f"/admin journal {partner.id} {day}", page)


async def admin_review(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "review <partner>")
    partner = ctx.catalog.require(ctx.args[0])
    tools = services(ctx)
    pending = await ctx.store.sessions_to_review(partner_id=partner.id)
    if not pending:
        return CommandReply(f"Nothing new to review for {partner.name}.")
    results: list[ReviewResult] = []
    for session in pending:
        results.append(await tools.reviewer.review(session.id))
    changes = {c.id: c for c in await tools.memory.changes(partner.dir)}
    lines = [
        f"Reviewed {len(pending)} session(s) of {partner.name}: "
        f"{sum(r.journal for r in results)} journal entr(ies)."
    ]
    for result in results:
        lines += [f"• {_describe(changes.get(cid), cid)}" for cid in result.changes]
        lines += [f"• skipped: {literal(reason)}" for reason in result.skipped]
        if result.note:
            lines.append(f"• {literal(result.note)}")
    if not any(r.changes for r in results):
        lines.append("No memory changes.")
    return CommandReply("\n".join(lines))


def _describe(change: Change | None, change_id: str) -> str:
    if change is None:
        return change_id
    text = change.new if change.new is not None else change.old
    return f"{change.file} {change.op}: {literal(text or '') or '(no text)'} ({change.id})"


async def admin_undo(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "undo <change id>")
    change_id = ctx.args[0]
    if not CHANGE_ID.match(change_id):
        raise AdminError(f"{change_id!r} is not a change id; ids look like c_18c2f0a1b2c3d")
    tools = services(ctx)
    roots = [tools.owner_file.root, *(p.dir for p in ctx.catalog.all())]
    for root in roots:
        found = next((c for c in await tools.memory.changes(root) if c.id == change_id), None)
        if found is None:
            continue
        result = await undo(tools.memory, root, change_id, source="/admin undo")
        if result.change_id is None:
            return CommandReply(f"{found.file} is already as it was before {change_id}.")
        return CommandReply(f"Undid {change_id} ({found.file} {found.op}) as {result.change_id}.")
    raise AdminError(
        f"no change {change_id} in any changelog (each keeps the last "
        f"{tools.memory.changelog_keep} records); /admin changes lists the latest"
    )


CHANGES_SHOWN = 20
CHANGE_TEXT_CHARS = 60


async def admin_changes(ctx: CommandContext) -> CommandReply:
    """The latest memory changes, newest first, with the ids ``/admin undo`` takes: one
    partner's, or (without one) the owner's memory and every partner's together."""
    page = pop_page(ctx.args)
    tools = services(ctx)
    if ctx.args:
        partner = ctx.catalog.require(ctx.args[0])
        roots, whose = [(partner.dir, "")], f"{partner.name}'s memory"
    else:
        roots = [(tools.owner_file.root, "yours")]
        roots += [(p.dir, p.id) for p in ctx.catalog.all()]
        whose = "your memory and every partner's"
    found = [(c, owner) for root, owner in roots for c in await tools.memory.changes(root)]
    if not found:
        return CommandReply(f"No changes recorded in {whose} yet.")
    found.sort(key=lambda pair: pair[0].time, reverse=True)
    zone = ctx.config.owner_timezone()
    lines = [_change_line(change, owner, zone) for change, owner in found[:CHANGES_SHOWN]]
    text = (
        f"Latest changes to {whose}, newest first:\n"
        + "\n".join(lines)
        + "\n\nReverse one: /admin undo <change id>"
    )
    return paged(text, " ".join(["/admin changes", *ctx.args]), page)


def _change_line(change: Change, owner: str, zone: tzinfo) -> str:
    when = datetime.fromisoformat(change.time).astimezone(zone)
    where = f"{owner}: {change.file}" if owner else change.file
    text = change.new if change.new is not None else change.old
    shown = ""
    if text and change.op != "replace_file":
        short = text if len(text) <= CHANGE_TEXT_CHARS else text[: CHANGE_TEXT_CHARS - 1] + "…"
        shown = f" “{literal_line(short)}”"
    return f"{change.id} {when:%Y-%m-%d %H:%M} {literal_line(where)} {change.op}{shown}"


# ---- conversations -----------------------------------------------------------------------


def _owner(ctx: CommandContext) -> Speaker:
    sender = ctx.inbound.sender
    return Speaker(sender.key, sender.display_name, True)


async def admin_consult(ctx: CommandContext) -> CommandReply:
    need(ctx, 2, "consult <partner> <question>")
    partner = ctx.catalog.require(ctx.args[0])
    chat = await ctx.store.chat(ctx.chat_key)
    if chat is None:
        raise AdminError("this chat is unknown; write to me once, then try again")
    answer = await services(ctx).consult(chat, _owner(ctx), partner.id, " ".join(ctx.args[1:]))
    return CommandReply(answer)


async def admin_transcript(ctx: CommandContext) -> CommandReply:
    need(ctx, 2, "transcript <partner> <session id>")
    partner = ctx.catalog.require(ctx.args[0])
    referenced = await find_session(ctx.store, partner, ctx.args[1])
    chat = await ctx.store.chat(ctx.chat_key)
    if chat is None:
        raise AdminError("this chat is unknown; write to me once, then try again")
    label = transcript_label(partner.name, referenced.title)
    first = MessageRow(
        0, None, None, chat.chat_key, None, ctx.inbound.sender.key, ctx.inbound.sender.display_name,
        "user", label, OWNER_AUDIENCE, "done", time.time(),
    )  # fmt: skip
    owner_session = await services(ctx).sessions.current(chat, None, _owner(ctx), first)
    await ctx.store.add_transcript_ref(owner_session.id, referenced.id, MAX_REFERENCES)
    count = (await ctx.store.message_counts([referenced.id])).get(referenced.id, 0)
    shown = transcript_label(partner.name, literal_line(referenced.title))
    text = (
        f"Added “{shown}” ({count} messages) to your assistant's context for this "
        "conversation; /new drops it."
    )
    if chat.selected_partner:
        text += " Your chat is set to a partner: /partner assistant talks with your assistant."
    return CommandReply(text)


async def find_session(store: Store, partner: Partner, raw: str) -> SessionRow:
    """The partner's session a (shortened) id names; AdminError says what is wrong."""
    prefix = raw.lower()
    if not SESSION_PREFIX.match(prefix):
        raise AdminError(f"{raw!r} is not a session id; /admin sessions {partner.id} lists them")
    found = await store.find_sessions(partner.id, prefix)
    if not found:
        raise AdminError(f"{partner.name} has no session {raw}; /admin sessions {partner.id}")
    if len(found) > 1:
        raise AdminError(f"{raw} matches several sessions; give more of the id")
    return found[0]


async def admin_sessions(ctx: CommandContext) -> CommandReply:
    page = pop_page(ctx.args)
    need(ctx, 1, "sessions <partner> [user]")
    partner = ctx.catalog.require(ctx.args[0])
    user_key = user_key_arg(ctx, ctx.args[1]) if len(ctx.args) > 1 else None
    rows = await ctx.store.partner_sessions(partner.id, user_key)
    if not rows:
        who = f" with {user_key}" if user_key else ""
        return CommandReply(f"{partner.name} has no sessions{who} yet.")
    counts = await ctx.store.message_counts([r.id for r in rows])
    zone = ctx.config.owner_timezone()
    lines = [f"Sessions of {partner.name}, newest first (id · started · title · who · size):"]
    for row in rows:
        started = datetime.fromtimestamp(row.created_at, zone).strftime("%Y-%m-%d %H:%M")
        state = "open" if row.ended_at is None else "ended"
        who = row.user_key or row.chat_key
        lines.append(
            f"{row.id[:SHORT_ID]} · {started} · “{literal_line(row.title) or 'untitled'}” · "
            f"{literal_line(who)} · "
            f"{counts.get(row.id, 0)} messages, {state}"
        )
    lines.append(f"Reference one here: /admin transcript {partner.id} <id>")
    command = " ".join(["/admin sessions", *ctx.args])
    return paged("\n".join(lines), command, page)
