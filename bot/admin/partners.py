"""Owner commands about partners: cards, create/clone/delete, show, edit files from the DM, set
preset.yml values (a model only one the endpoint serves) and reload (export:
``bot/admin/partner_export.py``).

Editing is a round trip of documents: ``partner edit`` sends a file whose caption carries its
fingerprint; the owner sends the edited copy back with ``/admin partner put <id> <FILE>
<fingerprint>`` as its caption. It is applied only while the file is still that version —
otherwise the owner's copy stays as it is and the current version comes back beside it as
``<id>-<FILE>.current.md``, so neither a memory the review just wrote nor the owner's edit is
lost. preset.yml changes touch only the one line they set, comments included.

Every change goes through the partner catalog, which writes where partners are kept: their
directories, or the database that every worker shares (``partners/catalog.py``).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

from bot.admin.args import AdminError, need, sent_file, services
from bot.commands.paging import paged, pop_page
from bot.commands.types import CommandContext, CommandReply
from bot.events import Choice
from bot.services.llm_check import MODEL, check_model
from bot.text.literal import literal_line
from partners.catalog import apply_search_languages
from partners.lore_books import POST_HISTORY_FILE
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import FileChanged
from partners.memory_format import fingerprint
from partners.persona import (
    PRESET_FILE,
    PROMPT_FILES,
    Partner,
    check_partner_id,
)
from partners.preset_edit import SETTABLE, changed_preset, parse_setting

EDITABLE_FILES = (*PROMPT_FILES, POST_HISTORY_FILE)
"""The persona files, and a character card's post-history instructions (sent every turn)."""
CONFIRM = "confirm"
MAX_EDIT_BYTES = 512 * 1024
MAX_AVATAR_CHARS = 500
FORCE = "--force"  # a partner's model the endpoint does not list (yet)
NEW_SESSIONS_NOTE = "It takes effect in new conversations; running ones keep their prompt."


async def admin_partners(ctx: CommandContext) -> CommandReply:
    page = pop_page(ctx.args)
    tokens = await services(ctx).budget.tokens_today()
    active = await ctx.store.last_activity()
    bindings = await ctx.store.bindings()
    zone = ctx.config.owner_timezone()
    cards = []
    for p in ctx.catalog.all():
        bound = sum(1 for b in bindings if b["partner_id"] == p.id)
        visibility = "public" if p.preset.public else "hidden"
        last = active.get(p.id)
        when = f"{datetime.fromtimestamp(last, zone):%Y-%m-%d %H:%M}" if last else "never"
        budget = p.preset.daily_token_budget
        used = f"{tokens.get(p.id, 0)}" + (f" of {budget}" if budget else "")
        description = literal_line(p.preset.description) if p.preset.description else ""
        cards.append(
            f"{literal_line(p.name)} ({p.id}) — {description or 'no description'}\n"
            f"  memory: {p.preset.memory_scope}, {visibility}, bound chats: {bound}\n"
            f"  last activity: {when}, tokens today: {used}"
        )
    for partner_id, error in ctx.catalog.errors.items():
        cards.append(f"{partner_id}: NOT LOADED — {error}")
    if not cards:
        return CommandReply("No partners yet: /admin partner new <id> <name>")
    return paged("\n\n".join(cards), "/admin partners", page)


async def partner_new(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "partner new <id> <name>")
    partner_id = check_partner_id(ctx.args[0])
    if ctx.catalog.get(partner_id) is not None:
        raise AdminError(f"a partner {partner_id!r} exists already; pick another id")
    if len(ctx.args) < 2:
        raise AdminError(
            f"Give it a name too: /admin partner new {partner_id} <name> (the id is for "
            "commands; the name is who it is, up to 60 characters)"
        )
    created = await ctx.catalog.new(partner_id, " ".join(ctx.args[1:]))
    await apply_search_languages(ctx.store, ctx.catalog)
    return CommandReply(
        f"Created {created.name} ({created.id}) from the template. Shape it with "
        f"/admin partner edit {created.id} SOUL.md (and IDENTITY.md, SYSTEM.md...). It is "
        f"private until you publish it: /admin partner set {created.id} public true."
    )


async def partner_clone(ctx: CommandContext) -> CommandReply:
    need(ctx, 2, "partner clone <source id> <new id>")
    cloned = await ctx.catalog.copy(ctx.args[0], ctx.args[1])
    await apply_search_languages(ctx.store, ctx.catalog)
    return CommandReply(
        f"Cloned {ctx.args[0]} to {cloned.id}: persona and own memory, without journals or "
        "what it knows about individual users."
    )


async def partner_delete(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "partner delete <id>")
    chosen = ctx.catalog.require(ctx.args[0])
    confirmed = len(ctx.args) > 1 and ctx.args[1].lower() == CONFIRM
    if not confirmed:
        command = f"/admin partner delete {chosen.id} {CONFIRM}"
        return CommandReply(
            f"Delete {chosen.name} ({chosen.id})? It moves to partners/.trash (nothing is "
            f"erased) and nobody can pick it any more. Send {command} to go ahead.",
            (Choice(f"Delete {chosen.name}", command),),
        )
    destination = await ctx.catalog.trash(chosen.id)
    return CommandReply(f"Moved {chosen.name} to {destination}.")


async def partner_show(ctx: CommandContext) -> CommandReply:
    need(ctx, 1, "partner show <id>")
    partner = ctx.catalog.require(ctx.args[0])
    preset = partner.preset
    lines = [
        f"{literal_line(partner.name)} ({partner.id})",
        f"description: {literal_line(preset.description) if preset.description else '(none)'}",
        f"memory scope: {preset.memory_scope}, public: {str(preset.public).lower()}",
        f"model: {preset.model or 'default'}, timezone: {preset.timezone or 'owner'}",
        f"avatar: {preset.avatar or '(none)'}",
        f"daily token budget: {preset.daily_token_budget or 'none'}",
        "files (name, characters, fingerprint):",
    ]
    for name in EDITABLE_FILES:
        data = (await services(ctx).memory.stored(MemoryFile(partner.dir, name))).data
        lines.append(f"  {name}: {len(data.decode('utf-8', 'replace'))}, {fingerprint(data)}")
    users = await _count(services(ctx).memory, partner.dir, "users")
    days = await _count(services(ctx).memory, partner.dir, "memory")
    sessions = await ctx.store.partner_sessions(partner.id)
    lines.append(f"per-user files: {users}, journal days: {days}, sessions: {len(sessions)}")
    lines.append(f"Edit a file: /admin partner edit {partner.id} SOUL.md")
    return CommandReply("\n".join(lines))


def _read_local(path: str) -> bytes:
    return Path(path).expanduser().read_bytes()


async def _count(memory: MemoryStore, root: Path, folder: str) -> int:
    return sum(name.endswith(".md") for name in await memory.documents.names(root, folder))


def _file_arg(raw: str) -> str:
    wanted = raw.upper().removesuffix(".MD") + ".md"
    if wanted not in EDITABLE_FILES:
        raise AdminError(
            f"{raw!r} is not a partner file; choose one of {', '.join(EDITABLE_FILES)}"
        )
    return wanted


def _send_back(console: bool) -> str:
    """How the edited file comes back: as a document with the command as its caption, or in
    the console (which saves files and takes none) as the command followed by its path."""
    if console:
        return "send this command followed by the path of your copy"
    return "send it back as a document with the caption"


def _edit_reply(
    partner: Partner, name: str, data: bytes, intro: str, console: bool = False
) -> CommandReply:
    version = fingerprint(data)
    put = f"/admin partner put {partner.id} {name} {version}"
    if not data:
        how = (
            f"Write the new text in a file, then {_send_back(True)}:\n"
            if console
            else "Send the new text as a document with the caption "
        )
        return CommandReply(f"{intro}{name} of {partner.name} is empty. {how}{put}")
    edit = "Edit the copy saved below, then" if console else "Edit it and"
    return CommandReply(
        f"{intro}{name} of {partner.name}, version {version}. {edit} {_send_back(console)}:\n{put}",
        attachment=(f"{partner.id}-{name}", data),
    )


async def partner_edit(ctx: CommandContext) -> CommandReply:
    need(ctx, 2, f"partner edit <id> <{'|'.join(EDITABLE_FILES)}>")
    partner = ctx.catalog.require(ctx.args[0])
    name = _file_arg(ctx.args[1])
    data = (await services(ctx).memory.stored(MemoryFile(partner.dir, name))).data
    return _edit_reply(partner, name, data, "", _in_console(ctx))


async def partner_put(ctx: CommandContext) -> CommandReply:
    need(ctx, 3, "partner put <id> <FILE> <fingerprint> (as the caption of the edited file)")
    partner = ctx.catalog.require(ctx.args[0])
    name = _file_arg(ctx.args[1])
    data, copy = await _uploaded(ctx)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AdminError(
            f"the file is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from exc
    file = MemoryFile(partner.dir, name)
    try:
        result = await services(ctx).memory.replace_file(
            file,
            text,
            ctx.args[2].lower(),
            reason="edited by the owner",
            source="/admin partner put",
        )
    except FileChanged as exc:
        return _conflict_reply(partner, name, exc, copy, _in_console(ctx))
    if result.change_id is None:
        return CommandReply(f"{name} of {partner.name} is unchanged: nothing to save.")
    current = (await services(ctx).memory.stored(file)).data
    return CommandReply(
        f"Saved {name} of {partner.name} (change {result.change_id}, now version "
        f"{fingerprint(current)}). {NEW_SESSIONS_NOTE}"
    )


def _conflict_reply(
    partner: Partner, name: str, error: FileChanged, copy: str, console: bool
) -> CommandReply:
    """The put was refused: the owner's copy is left alone, and the current version comes
    under its own name so that saving it (the console writes it to disk) cannot replace the
    copy the owner edited."""
    version = fingerprint(error.current)
    put = f"/admin partner put {partner.id} {name} {version}"
    kept = f"Not saved: {error}. Your edited copy ({copy}) is kept as it is."
    if not error.current:
        again = "send this command followed by its path" if console else "send it with the caption"
        return CommandReply(f"{kept} {name} of {partner.name} is empty now; {again} again:\n{put}")
    current = f"{partner.id}-{name.removesuffix('.md')}.current.md"
    where = "saved below" if console else "attached"
    return CommandReply(
        f"{kept} The current version ({version}) is {where} as {current}: bring your "
        f"changes into it, then {_send_back(console)}:\n{put}",
        attachment=(current, error.current),
    )


def _in_console(ctx: CommandContext) -> bool:
    return ctx.inbound.chat.platform == "console"


async def _uploaded(ctx: CommandContext) -> tuple[bytes, str]:
    """The edited file and where it came from: the message's document, or in the console a
    local path after the fingerprint (only there: a chat command must never read files of
    the server)."""
    sent = await sent_file(ctx, MAX_EDIT_BYTES)
    if sent is not None:
        data, copy = sent[1], "the document you sent"
    elif ctx.inbound.chat.platform == "console" and len(ctx.args) > 3:
        copy = " ".join(ctx.args[3:])
        try:
            data = await asyncio.to_thread(_read_local, copy)
        except OSError as exc:
            raise AdminError(f"cannot read {copy}: {exc.strerror}") from exc
    else:
        raise AdminError(
            "send the edited file as a document, with this command as its caption "
            "(in the console: add the file's path after the fingerprint)"
        )
    if len(data) > MAX_EDIT_BYTES:
        raise AdminError(f"the file is {len(data)} bytes; the limit is {MAX_EDIT_BYTES}")
    return data, copy


async def partner_set(ctx: CommandContext) -> CommandReply:
    """One preset.yml setting, checked with the whole file and written in place (every
    other byte kept: ``partners/preset_edit.py``)."""
    force = FORCE in ctx.args
    args = [arg for arg in ctx.args if arg != FORCE]
    need(
        ctx,
        3 + force,
        "partner set <id> <key> <value> [--force] (keys: " + ", ".join(SETTABLE) + ")",
    )
    partner = ctx.catalog.require(args[0])
    key = args[1].lower()
    raw = " ".join(args[2:])
    if key == "avatar" and raw.lower() not in ("none", "default"):
        _check_avatar(raw)
    keys, value = parse_setting(key, raw)
    note = await _model_note(ctx, partner.id, value) if key == "model" and not force else ""

    def edit(data: bytes | None) -> bytes:
        return changed_preset(data or b"", keys, value, partner.id).encode("utf-8")

    await ctx.catalog.change_file(partner.id, PRESET_FILE, edit)
    await apply_search_languages(ctx.store, ctx.catalog)  # a new language re-indexes
    if partner.id in ctx.catalog.errors:
        return CommandReply(
            f"Saved, but {partner.id} no longer loads: {ctx.catalog.errors[partner.id]}"
        )
    shown = str(value).lower() if isinstance(value, bool) else value
    if value is None:
        shown = "back to its default"
    return CommandReply(f"{partner.id}: {key} is now {shown}.{note} {NEW_SESSIONS_NOTE}")


async def _model_note(ctx: CommandContext, partner_id: str, model: object) -> str:
    """A partner's model must be one the endpoint serves (refused with the list it serves);
    a note when the endpoint could not say."""
    if not isinstance(model, str):
        return ""  # back to llm.model
    checked = await check_model(ctx.config.llm, model)
    if checked.setting == MODEL:
        raise AdminError(
            f"{checked.problem}. Pick one of them, or set it anyway: "
            f"/admin partner set {partner_id} model {model} {FORCE}"
        )
    if checked.problem is not None:
        return f" (Not checked against the endpoint: {checked.problem}.)"
    return "" if checked.models is not None else " (Not checked: the endpoint lists no models.)"


def _check_avatar(value: str) -> None:
    if len(value) > MAX_AVATAR_CHARS or not value.startswith(("https://", "http://")):
        raise AdminError("an avatar is an image URL (https://...), or none")


async def admin_reload(ctx: CommandContext) -> CommandReply:
    await ctx.catalog.reread()
    await apply_search_languages(ctx.store, ctx.catalog)
    ids = ", ".join(p.id for p in ctx.catalog.all()) or "none"
    lines = [f"Reloaded partners: {ids}. {NEW_SESSIONS_NOTE}"]
    lines += [f"{pid}: NOT LOADED — {error}" for pid, error in ctx.catalog.errors.items()]
    return CommandReply("\n".join(lines))
