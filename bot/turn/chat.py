"""One turn: the frozen system prompt, a window of history, the new messages in an envelope,
and LLM tool rounds until the model answers.

The envelope carries dynamic facts — the time, and the speaker's name in groups — so the system
prompt stays byte-identical on every turn and provider prompt caches keep hitting. Tool rounds
are bounded by ``llm.max_tool_rounds``; after the last one the model must answer without tools.
A provider's context-length error trims the history and retries once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.events import ToolCall, Usage
from bot.services.llm import Completion, ContextTooLong, Delta, LLMClient
from bot.store import MessageRow, Store
from bot.turn.tools import ToolSurface
from partners.lore_books import DepthNote
from partners.tools import ToolContext

logger = logging.getLogger(__name__)

FINAL_ANSWER_NOTE = "(Tool limit reached for this turn: answer now with what you have.)"
GROUP_CONTEXT_NOTE = "Recent messages in this group that were not addressed to you:"
REACTIONS_NOTE = "Since your last reply (no answer needed for these alone):"
SCENE_SINCE_NOTE = "Said in this group since that message, before your turn:"


@dataclass(frozen=True)
class TurnInput:
    system_prompt: str
    history: Sequence[MessageRow]
    new_messages: Sequence[MessageRow]
    context: Sequence[MessageRow] = ()
    is_group: bool = False
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    transcript: str | None = None
    """A referenced third-party transcript placed before the new messages, if any."""
    notes: Mapping[int, str] = field(default_factory=dict)
    """Message id -> how it is marked for the model ("voice message", "photo", ...)."""
    images: Mapping[int, Sequence[str]] = field(default_factory=dict)
    """Message id -> image part URLs sent with it (new messages only, this turn only)."""
    reactions: Sequence[MessageRow] = ()
    """Users' reactions to the partner's messages since its last reply."""
    after_history: str = ""
    """Lorebook entries that fired and a card's post-history instructions
    (``partners/lore_books.py``): placed after the new messages, never in the system prompt, so the
    system prompt and the history stay byte-identical from turn to turn and prompt caches keep
    hitting; it is not stored, so the next turn's history does not carry it."""
    depth_note: DepthNote | None = None
    """A card's depth prompt, placed among the conversation's messages at its depth."""
    context_after: Sequence[MessageRow] = ()
    """In a scene: what others said after the message this turn answers (another partner
    answering it first), shown after it (``bot/turn/scene_turns.py``)."""


@dataclass(frozen=True)
class TurnOutput:
    text: str
    usage: Usage
    tool_calls: tuple[ToolCall, ...]
    model: str
    calls: int


def envelope(row: MessageRow, timezone: ZoneInfo, is_group: bool, note: str | None = None) -> str:
    """How a stored user message is shown to the model (identical every time it is shown);
    ``note`` marks what the message was (a voice message, a photo)."""
    when = datetime.fromtimestamp(row.created_at, timezone).strftime("%Y-%m-%d %H:%M %a")
    who = f" · {row.speaker}" if is_group and row.speaker else ""
    marked = f" ({note})" if note else ""
    return f"[{when}{who}{marked}] {row.text}".rstrip()


def history_window(rows: Sequence[MessageRow], max_chars: int) -> list[MessageRow]:
    """The newest messages that fit in ``max_chars``, oldest first."""
    kept: list[MessageRow] = []
    used = 0
    for row in reversed(rows):
        used += len(row.text)
        if used > max_chars and kept:
            break
        kept.append(row)
    kept.reverse()
    # A cut window starts at a user turn, not halfway through an exchange; an uncut one may
    # start with the partner's greeting, which opened the conversation (bot/delivery/greeter.py).
    if len(kept) < len(rows):
        while kept and kept[0].role != "user":
            kept.pop(0)
    return kept


def build_messages(turn: TurnInput) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if turn.system_prompt.strip():  # a card that keeps its all in its lorebook has none
        messages.append({"role": "system", "content": turn.system_prompt})
    chat: list[dict[str, Any]] = []
    for row in turn.history:
        if row.role == "user":
            content = envelope(row, turn.timezone, turn.is_group, turn.notes.get(row.id))
            chat.append({"role": "user", "content": content})
        else:
            chat.append({"role": "assistant", "content": row.text})
    if turn.transcript:
        chat.append({"role": "user", "content": turn.transcript})
    if turn.context:
        lines = [envelope(row, turn.timezone, True) for row in turn.context]
        chat.append({"role": "user", "content": "\n".join([GROUP_CONTEXT_NOTE, *lines])})
    if turn.reactions:
        lines = [envelope(row, turn.timezone, False) for row in turn.reactions]
        chat.append({"role": "user", "content": "\n".join([REACTIONS_NOTE, *lines])})
    for row in turn.new_messages:
        text = envelope(row, turn.timezone, turn.is_group, turn.notes.get(row.id))
        chat.append({"role": "user", "content": _with_images(text, turn.images.get(row.id))})
    if turn.context_after:
        lines = [envelope(row, turn.timezone, True) for row in turn.context_after]
        chat.append({"role": "user", "content": "\n".join([SCENE_SINCE_NOTE, *lines])})
    note = turn.depth_note
    if note is not None:  # SillyTavern's depth: messages counted back from the newest
        chat.insert(max(0, len(chat) - note.depth), {"role": note.role, "content": note.text})
    messages += chat
    if turn.after_history:
        messages.append({"role": "user", "content": turn.after_history})
    return messages


def _with_images(text: str, images: Sequence[str] | None) -> str | list[dict[str, Any]]:
    """A user message's content: its text, and its image parts if it has any."""
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
    return parts


class ChatLoop:
    def __init__(self, llm: LLMClient, store: Store, max_tool_rounds: int) -> None:
        self.llm = llm
        self.store = store
        self.max_tool_rounds = max_tool_rounds

    async def run(
        self,
        turn: TurnInput,
        surface: ToolSurface,
        ctx: ToolContext,
        *,
        model: str,
        on_delta: Delta | None = None,
    ) -> TurnOutput:
        try:
            return await self._run(build_messages(turn), surface, ctx, model, on_delta)
        except ContextTooLong:
            keep = len(turn.history) // 2
            logger.warning("context too long; retrying with %d of %d history rows", keep, keep * 2)
            trimmed = replace(
                turn,
                history=history_window(turn.history[len(turn.history) - keep :], 10**9),
                context=turn.context[-3:],
                transcript=None,
            )
            return await self._run(build_messages(trimmed), surface, ctx, model, on_delta)

    async def _run(
        self,
        messages: list[dict[str, Any]],
        surface: ToolSurface,
        ctx: ToolContext,
        model: str,
        on_delta: Delta | None,
    ) -> TurnOutput:
        usage = Usage()
        calls: list[ToolCall] = []
        schemas = surface.schemas()
        completion: Completion | None = None
        for round_number in range(self.max_tool_rounds + 1):
            final = round_number == self.max_tool_rounds
            if final:
                messages.append({"role": "user", "content": FINAL_ANSWER_NOTE})
            completion = await self.llm.complete(
                messages,
                model=model,
                tools=None if final or not schemas else schemas,
                on_delta=on_delta,
            )
            usage = usage + completion.usage
            if final or not completion.tool_calls:
                break
            messages.append(_assistant_with_calls(completion))
            for call in completion.tool_calls:
                calls.append(call)
                outcome = await surface.call(call, ctx)
                messages.append(
                    {"role": "tool", "tool_call_id": call.id, "content": outcome.content}
                )
        assert completion is not None
        return TurnOutput(
            completion.text.strip(), usage, tuple(calls), completion.model, round_number + 1
        )


def _assistant_with_calls(completion: Completion) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": completion.text or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in completion.tool_calls
        ],
    }
