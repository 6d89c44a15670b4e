"""The tools a model can call: the partner's three always-on memory tools and the owner's.

``partner_read``, ``partner_memorize`` and ``partner_search`` are force-mounted on every partner
turn (docs/architecture.md "Split memory model"). Where they may read and write is decided here
from the turn's :class:`ToolContext`, never from the model's arguments: a partner writes only its
own namespace (or the current user's file in ``per_user`` scope), reads the owner's memory but
never writes it, and searches only history the current user may see."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.store import SearchHit, Store
from bot.store.search_terms import DEFAULT_LANGUAGE, snippet
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import MemoryInputError
from partners.memory_format import MAX_ENTRY_CHARS, text_hash
from partners.persona import Partner
from partners.recall import Recall

logger = logging.getLogger(__name__)

SEARCH_DEFAULT_LIMIT = 30
SEARCH_MAX_LIMIT = 100
SNIPPET_CHARS = 200
EMPTY_SECTION = "none yet — use partner_memorize to add"


class ToolError(Exception):
    """Goes back to the model as the tool's result, marked as an error; never crashes a turn."""


@dataclass
class TurnBudget:
    """Mutable per-turn state a tool may count against."""

    consults_left: int = 0


@dataclass(frozen=True)
class ToolContext:
    """Everything a tool may touch on this turn, decided by the gateway, not the model. Built
    by one of its constructors, one per use: a partner's turn, the owner assistant's turn, and
    a history search outside any turn (the web page)."""

    store: Store
    memory: MemoryStore
    owner_file: MemoryFile
    session_id: str
    actor: str
    """Who is talking: a user key, used for audit rows."""
    partner: Partner | None = None
    write_file: MemoryFile | None = None
    """Where partner_memorize writes: the partner's MEMORY.md or the current user's file."""
    user_file: MemoryFile | None = None
    """The current user's file, shown by partner_read (a DM in per_user scope only)."""
    user_name: str = ""
    audiences: list[str] | None = field(default_factory=list)
    """Whose history partner_search may return; None means all of the partner's."""
    source_message_id: int | None = None
    consult: Callable[[str, str], Awaitable[str]] | None = None
    budget: TurnBudget = field(default_factory=TurnBudget)
    recall: Recall | None = None
    """History search, semantic when embeddings are configured; None: lexical on ``store``."""

    @classmethod
    def for_partner(
        cls,
        turn: TurnTools,
        partner: Partner,
        *,
        write_file: MemoryFile,
        user_file: MemoryFile | None,
        audiences: list[str] | None,
    ) -> ToolContext:
        """A partner's turn: its memory (or the user's), and the history its audience may see."""
        return cls(
            **turn.shared(),
            partner=partner,
            write_file=write_file,
            user_file=user_file,
            audiences=audiences,
        )

    @classmethod
    def for_owner(
        cls, turn: TurnTools, consult: Callable[[str, str], Awaitable[str]], consults: int
    ) -> ToolContext:
        """The owner assistant's turn: the owner's memory, and ``consults`` partner consults."""
        return cls(**turn.shared(), consult=consult, budget=TurnBudget(consults_left=consults))

    @classmethod
    def for_search(
        cls, store: Store, memory: MemoryStore, owner_file: MemoryFile, actor: str, partner: Partner
    ) -> ToolContext:
        """A search of ``partner``'s whole history outside a turn, over every audience."""
        return cls(store, memory, owner_file, "", actor, partner=partner, audiences=None)


@dataclass(frozen=True)
class TurnTools:
    """What every turn's tools share, whoever talks: the stores, the session and the speaker."""

    store: Store
    memory: MemoryStore
    owner_file: MemoryFile
    session_id: str
    actor: str
    user_name: str
    source_message_id: int
    recall: Recall | None

    def shared(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


Handler = Callable[[ToolContext, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


MEMORY_OP_PROPERTIES = {
    "op": {"type": "string", "enum": ["add", "edit", "remove"]},
    "text": {"type": "string", "description": f"One fact, <= {MAX_ENTRY_CHARS} chars."},
    "target_id": {"type": "string", "description": "Entry id (m_...) for edit/remove."},
    "reason": {"type": "string"},
}


def _text_arg(args: dict[str, Any], key: str, required: bool = True) -> str:
    value = args.get(key)
    if value is None or value == "":
        if required:
            raise ToolError(f"missing '{key}'")
        return ""
    if not isinstance(value, str):
        raise ToolError(f"'{key}' must be a string")
    return value


async def _apply_memory_op(
    ctx: ToolContext, file: MemoryFile, args: dict[str, Any], source: str
) -> str:
    op = _text_arg(args, "op")
    reason = _text_arg(args, "reason", required=False) or "(no reason given)"
    origin = f"{source} by {ctx.actor} (message {ctx.source_message_id})"
    try:
        if op == "add":
            result = await ctx.memory.add(
                file, _text_arg(args, "text"), reason=reason, source=origin
            )
            if result.duplicate:
                return f"already saved (entry={result.entry_id or 'hand-written line'})"
            return f"saved (entry={result.entry_id})"
        target = _text_arg(args, "target_id")
        if op == "edit":
            result = await ctx.memory.edit(
                file, target, _text_arg(args, "text"), reason=reason, source=origin
            )
            if result.duplicate:
                return f"already saved (entry={result.entry_id}); remove {target} instead"
            return f"updated (entry={target})"
        if op == "remove":
            await ctx.memory.remove(file, target, reason=reason, source=origin)
            return f"removed (entry={target})"
    except MemoryInputError as exc:
        raise ToolError(str(exc)) from exc
    except OSError as exc:
        # A full disk: the file is left as it was (writes are atomic); the model can tell
        # the user it could not save, and the owner finds the cause in the log.
        logger.error("memory write to %s failed: %s", file.path, exc)
        raise ToolError(f"could not save ({exc.strerror or exc}); nothing was changed") from exc
    raise ToolError(f"unknown op {op!r}; use add, edit or remove")


def _entries_block(text: str) -> str:
    body = text.strip()
    return body if body else EMPTY_SECTION


# ---- partner tools ---------------------------------------------------------------------


async def partner_read(ctx: ToolContext, args: dict[str, Any]) -> str:
    del args  # takes no arguments
    assert ctx.partner is not None
    own = MemoryFile(ctx.partner.dir, "MEMORY.md")
    parts = [
        "## Shared memory (the owner's — read-only)",
        _entries_block(await ctx.memory.read(ctx.owner_file)),
        "## Your own memory",
        _entries_block(await ctx.memory.read(own)),
    ]
    if ctx.user_file is not None:
        parts += [f"## About {ctx.user_name}", _entries_block(await ctx.memory.read(ctx.user_file))]
    return "\n\n".join(parts)


async def partner_memorize(ctx: ToolContext, args: dict[str, Any]) -> str:
    if ctx.write_file is None:
        raise ToolError("memory is read-only in this conversation")
    before = await _replaced_text(ctx, ctx.write_file, args)
    answer = await _apply_memory_op(ctx, ctx.write_file, args, "partner_memorize")
    if before is not None and ctx.partner is not None:
        # a user's correction: the review must not write the old fact back
        await ctx.store.add_tombstones(ctx.partner.id, ctx.actor, {text_hash(before)})
    return answer


async def _replaced_text(ctx: ToolContext, file: MemoryFile, args: dict[str, Any]) -> str | None:
    """The text an edit or remove in a user's own file is about to replace."""
    if args.get("op") not in ("edit", "remove") or not file.name.startswith("users/"):
        return None
    target = args.get("target_id")
    entry = next((e for e in await ctx.memory.entries(file) if e.id == target), None)
    return entry.text if entry else None


async def partner_search(ctx: ToolContext, args: dict[str, Any]) -> str:
    assert ctx.partner is not None
    query = _text_arg(args, "query")
    limit = args.get("limit", SEARCH_DEFAULT_LIMIT)
    if isinstance(limit, str) and limit.isdigit():
        limit = int(limit)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ToolError(f"'limit' must be a whole number from 1 to {SEARCH_MAX_LIMIT}")
    since, until = _day_arg(args, "since"), _day_arg(args, "until")
    recall = ctx.recall or Recall(ctx.store)
    hits = await recall.search(
        ctx.partner.id,
        query[:1000],
        ctx.audiences,
        min(limit, SEARCH_MAX_LIMIT),
        since=since.timestamp() if since else None,
        until=(until + timedelta(days=1)).timestamp() if until else None,
        speaker=_text_arg(args, "speaker", required=False) or None,
    )
    if not hits:
        return f"no past messages match {query!r}"
    return "\n".join(format_hit(hit, query, ctx.partner.preset.language) for hit in hits)


def _day_arg(args: dict[str, Any], key: str) -> datetime | None:
    """A YYYY-MM-DD argument as the start of that day in UTC (the time zone results show)."""
    value = _text_arg(args, key, required=False)
    if not value:
        return None
    try:
        day = date.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"'{key}' must be a date like 2024-05-31, not {value!r}") from None
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def hit_moment(created_at: float) -> datetime | None:
    """When a found message was said, in UTC; None for a stored time no date can show (a
    history imported with milliseconds taken for seconds): the hit is still shown."""
    try:
        return datetime.fromtimestamp(created_at, UTC)
    except (ValueError, OverflowError, OSError):
        return None


def format_hit(hit: SearchHit, query: str = "", language: str = DEFAULT_LANGUAGE) -> str:
    """One result line: where and when, then the part of the message around the words the
    query matched."""
    moment = hit_moment(hit.created_at)
    when = moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "unknown time"
    text = snippet(hit.text, query, language, SNIPPET_CHARS)
    return f"[{hit.session_title or 'untitled'} · {hit.role} · {when}] {text}"


PARTNER_TOOLS = (
    ToolSpec(
        "partner_read",
        "Read your memory: the owner's shared notes (read-only), your own notes, and what you "
        "know about the person you are talking with. Entry ids are shown for edits.",
        _object({}, []),
        partner_read,
    ),
    ToolSpec(
        "partner_memorize",
        "Save, correct or remove one lasting fact or preference in your own memory.",
        _object(MEMORY_OP_PROPERTIES, ["op"]),
        partner_memorize,
    ),
    ToolSpec(
        "partner_search",
        "Search your past conversations (best matches first).",
        _object(
            {
                "query": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX_LIMIT},
                "since": {"type": "string", "description": "YYYY-MM-DD"},
                "until": {"type": "string", "description": "YYYY-MM-DD, inclusive"},
                "speaker": {"type": "string", "description": "only this person's messages"},
            },
            ["query"],
        ),
        partner_search,
    ),
)
PARTNER_TOOL_NAMES = tuple(tool.name for tool in PARTNER_TOOLS)


# ---- owner assistant tools -------------------------------------------------------------


async def read_memory(ctx: ToolContext, args: dict[str, Any]) -> str:
    del args  # takes no arguments
    return _entries_block(await ctx.memory.read(ctx.owner_file))


async def write_memory(ctx: ToolContext, args: dict[str, Any]) -> str:
    return await _apply_memory_op(ctx, ctx.owner_file, args, "write_memory")


async def consult_partner(ctx: ToolContext, args: dict[str, Any]) -> str:
    partner_id = _text_arg(args, "partner")
    question = _text_arg(args, "question")
    if ctx.consult is None:
        raise ToolError("consulting partners is not available here")
    if ctx.budget.consults_left <= 0:
        raise ToolError("consult budget reached — answer directly")
    ctx.budget.consults_left -= 1
    started = time.monotonic()
    answer = await ctx.consult(partner_id, question)
    left = ctx.budget.consults_left
    took = time.monotonic() - started
    return f"{answer}\n\n({left} consults left this turn; took {took:.1f} s)"


OWNER_TOOLS = (
    ToolSpec(
        "read_memory",
        "Read the owner's shared memory (every partner can read it).",
        _object({}, []),
        read_memory,
    ),
    ToolSpec(
        "write_memory",
        "Add, edit or remove one entry of the owner's shared memory.",
        _object(MEMORY_OP_PROPERTIES, ["op"]),
        write_memory,
    ),
    ToolSpec(
        "consult_partner",
        "Ask one of your partners a question; it answers as itself, with its own memory.",
        _object(
            {"partner": {"type": "string"}, "question": {"type": "string"}}, ["partner", "question"]
        ),
        consult_partner,
    ),
)
OWNER_MEMORY_TOOL_NAMES = ("read_memory", "write_memory")


def user_memory_file(partner: Partner, user_key: str) -> MemoryFile:
    """The per-user file of one user; the name is derived from the key, never from input."""
    return MemoryFile(partner.dir, user_memory_name(user_key))


def user_memory_name(user_key: str) -> str:
    """The per-user file's name inside its partner (``users/telegram-7.md``)."""
    safe = "".join(ch if ch.isalnum() else "-" for ch in user_key).strip("-").lower()
    if not safe:
        raise ValueError(f"cannot derive a file name from user key {user_key!r}")
    return str(Path("users") / f"{safe}.md")
