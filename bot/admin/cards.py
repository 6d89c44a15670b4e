"""Owner commands for character cards and lorebooks: ``/admin partner import`` (the card sent
as a document), ``/admin partner export <id> --card`` and ``/admin lore <partner> [query]``.

An import is shown before it lands. The card the owner sent is kept in ``data/imports/``
under a short token until they confirm (the confirming message carries no file), then planned
again and written all at once. A staged card can be confirmed for a day; after that the
confirmation is refused and the card removed (any import also removes those over a day old).
Everything that came from the card (its name, field names) is shown as literal text.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from bot.admin.args import AdminError, file_reply, need, sent_file, services
from bot.commands.paging import paged, pop_page
from bot.commands.types import CommandContext, CommandReply
from bot.events import Choice
from bot.store.search_terms import fold
from bot.text.literal import literal_line
from partners.card_format import MAX_CARD_FILE_BYTES
from partners.cards import TEXT_FILES, export_partner, import_files, plan_import
from partners.catalog import apply_search_languages
from partners.lore import DEFAULT_BUDGET, Lorebook, LoreEntry
from partners.lore_books import LoreBudget, too_large_notes
from partners.memory import MemoryFile

CONFIRM = "confirm"
STAGING = "imports"
STAGED_SECONDS = 24 * 3600
"""A staged card can be confirmed for a day; after that it is refused and removed."""
EXPIRED = "That import expired (cards wait a day); send the card again."
TOKEN_CHARS = 10
NO_CARD = (
    "Send the character card (PNG, JSON, CHARX, RisuAI's JPEG, Pygmalion JSON or oobabooga "
    "YAML, up to {limit} MB) as a file — not as a photo, which loses the card — with the "
    "caption /admin partner import [id]."
)
MAX_ENTRY_CHARS = 160


async def partner_import(ctx: CommandContext) -> CommandReply:
    if ctx.args and ctx.args[0].lower() == CONFIRM:
        need(ctx, 2, f"partner import {CONFIRM} <token>")
        return await _confirmed(ctx, ctx.args[1].lower())
    sent = await sent_file(ctx, MAX_CARD_FILE_BYTES)
    if sent is None:
        raise AdminError(NO_CARD.format(limit=MAX_CARD_FILE_BYTES // (1024 * 1024)))
    filename, raw = sent
    wanted = ctx.args[0] if ctx.args else None
    await ctx.catalog.refresh()  # an id another worker took a moment ago is taken
    budget = LoreBudget.configured(ctx.config).tokens()
    plan = await asyncio.to_thread(plan_import, raw, filename, wanted, _taken(ctx), budget)
    token = hashlib.sha256(raw).hexdigest()[:TOKEN_CHARS]
    await asyncio.to_thread(_stage, _staging(ctx), token, raw, filename, plan.partner_id)
    command = f"/admin partner import {CONFIRM} {token}"
    lines = [f"Import {literal_line(plan.name)} from {literal_line(filename)}?"]
    lines += [f"• {literal_line(line)}" for line in plan.summary()]
    lines.append(f"Send {command} to create it.")
    return CommandReply("\n".join(lines), (Choice("Import", command),))


async def _confirmed(ctx: CommandContext, token: str) -> CommandReply:
    staged = await asyncio.to_thread(_unstage, _staging(ctx), token)
    if staged is None:
        raise AdminError(
            f"no card waits under {literal_line(token)} (it was imported, or is over a day "
            "old); send the card again"
        )
    raw, filename, partner_id = staged
    await ctx.catalog.refresh()
    plan = await asyncio.to_thread(plan_import, raw, filename, partner_id, _taken(ctx))
    await ctx.catalog.add(plan.partner_id, import_files(plan))
    await asyncio.to_thread(_discard, _staging(ctx), token)
    await apply_search_languages(ctx.store, ctx.catalog)
    if plan.partner_id in ctx.catalog.errors:
        problem = ctx.catalog.errors[plan.partner_id]
        return CommandReply(f"Imported, but {plan.partner_id} does not load: {problem}")
    return CommandReply(
        f"Created {literal_line(plan.name)} ({plan.partner_id}). Talk with it: "
        f"/partner {plan.partner_id}; its lorebook: /admin lore {plan.partner_id}"
    )


def _taken(ctx: CommandContext) -> Callable[[str], bool]:
    """Whether a partner id is in use: a directory (files) or a partner the catalog knows
    (rows, where another worker's disk may still hold an old directory of that name)."""
    if ctx.catalog.rows is None:
        return lambda partner_id: (ctx.catalog.root / partner_id).exists()
    return lambda partner_id: ctx.catalog.get(partner_id) is not None


def _staging(ctx: CommandContext) -> Path:
    return ctx.config.data_dir / STAGING


def _stage(directory: Path, token: str, raw: bytes, filename: str, partner_id: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - STAGED_SECONDS
    for old in directory.iterdir():
        if old.stat().st_mtime < cutoff:
            old.unlink(missing_ok=True)
    (directory / f"{token}.card").write_bytes(raw)
    meta = {"filename": filename, "id": partner_id}
    (directory / f"{token}.json").write_text(json.dumps(meta), encoding="utf-8")


def _unstage(directory: Path, token: str) -> tuple[bytes, str, str] | None:
    """The card staged under ``token`` (None if there is none); one staged over a day ago
    is removed and refused: the owner confirms what they have just seen, not last week's."""
    if not token.isalnum():
        return None
    card, meta = directory / f"{token}.card", directory / f"{token}.json"
    if not card.exists() or not meta.exists():
        return None
    if card.stat().st_mtime < time.time() - STAGED_SECONDS:
        _discard(directory, token)
        raise AdminError(EXPIRED)
    details = json.loads(meta.read_text(encoding="utf-8"))
    return card.read_bytes(), str(details["filename"]), str(details["id"])


def _discard(directory: Path, token: str) -> None:
    for suffix in (".card", ".json"):
        (directory / f"{token}{suffix}").unlink(missing_ok=True)


async def partner_export(ctx: CommandContext) -> CommandReply:
    """``/admin partner export <id> --card [json]``: a V3 card, PNG unless json is asked."""
    need(ctx, 2, "partner export <id> --card [json]")
    partner = ctx.catalog.require(ctx.args[0])
    if ctx.args[1].lower() != "--card":
        raise AdminError(
            "Usage: /admin partner export <id> --card [json] (the whole directory with its "
            "sessions: /admin export <id>)"
        )
    as_png = not (len(ctx.args) > 2 and ctx.args[2].lower() == "json")
    memory = services(ctx).memory
    texts = {name: (await memory.stored(MemoryFile(partner.dir, name))).data for name in TEXT_FILES}
    decoded = {name: data.decode("utf-8", "replace") for name, data in texts.items()}
    data = await asyncio.to_thread(export_partner, partner, decoded, as_png)
    filename = f"{partner.id}.{'png' if as_png else 'json'}"
    return file_reply(
        f"{literal_line(partner.name)} as a V3 character card (no memory)", filename, data
    )


async def admin_lore(ctx: CommandContext) -> CommandReply:
    """A partner's lorebook entries (those matching a query, if given) and what fired on its
    last turn."""
    page = pop_page(ctx.args)
    need(ctx, 1, "lore <partner> [query]")
    partner = ctx.catalog.require(ctx.args[0])
    lore = services(ctx).lore
    book = await asyncio.to_thread(lore.book, partner) if lore else None
    problems = lore.problems.get(partner.id, ()) if lore else ()
    if book is None and problems:
        return CommandReply(
            f"{literal_line(partner.name)}'s lorebook is not used: {literal_line(problems[0])}"
        )
    if book is None or not book.entries:
        return CommandReply(f"{literal_line(partner.name)} has no lorebook entries.")
    query = " ".join(ctx.args[1:])
    shown = [e for e in book.entries if not query or _mentions(e, query)]
    budget = lore.budget.tokens(partner) if lore else DEFAULT_BUDGET
    lines = [_heading(partner.name, book, budget, len(shown), query)]
    problems = (*problems, *too_large_notes(book, budget))
    lines += [f"Problem: {literal_line(problem)}" for problem in problems]
    last = lore.last.get(partner.id) if lore else None
    if last is not None:
        fired = ", ".join(literal_line(label) for label in last.fired) or "none"
        when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(last.at))
        lines.append(f"Last turn ({when} UTC): fired {fired}")
    lines += [_entry_line(e) for e in shown]
    return paged("\n".join(lines), f"/admin lore {partner.id} {query}".rstrip(), page)


def _heading(name: str, book: Lorebook, budget: int, shown: int, query: str) -> str:
    scope = f", {shown} matching {literal_line(query)!r}" if query else ""
    return (
        f"{literal_line(name)}'s lorebook: {len(book.entries)} entries{scope}; scans "
        f"{book.scan_depth} messages, budget {budget:,} tokens"
        + (", recursive" if book.recursive else "")
    )


def _mentions(entry: LoreEntry, query: str) -> bool:
    wanted = fold(query)
    return any(wanted in fold(text) for text in (entry.label, entry.content, *entry.keys))


def _entry_line(entry: LoreEntry) -> str:
    flags = [
        flag
        for flag, on in (
            ("constant", entry.constant),
            ("off", not entry.enabled),
            ("selective", entry.selective),
            (f"{entry.probability}%", entry.probability < 100),
            ("case", entry.case_sensitive),
        )
        if on
    ]
    keys = ", ".join(entry.keys) or "(no keys)"
    text = " ".join(entry.content.split())
    if len(text) > MAX_ENTRY_CHARS:
        text = text[: MAX_ENTRY_CHARS - 1] + "…"
    shown_flags = f" [{', '.join(flags)}]" if flags else ""
    return (
        f"• {literal_line(entry.label)} — keys: {literal_line(keys)}{shown_flags}\n"
        f"  {literal_line(text)}"
    )
