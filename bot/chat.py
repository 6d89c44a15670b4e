"""One turn: the frozen system prompt, a window of history, the new messages in an envelope,
and LLM tool rounds until the model answers.

The envelope carries dynamic facts — the time, and the speaker's name in groups — so the system
prompt stays byte-identical on every turn and provider prompt caches keep hitting. Tool rounds
are bounded by ``llm.max_tool_rounds``; after the last one the model must answer without tools.
A provider's context-length error trims the history and retries once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.events import ToolCall, Usage
from bot.llm import Completion, ContextTooLong, Delta, LLMClient
from bot.store import MessageRow, Store
from bot.tools import ToolSurface
from partners.tools import ToolContext

logger = logging.getLogger(__name__)

FINAL_ANSWER_NOTE = "(Tool limit reached for this turn: answer now with what you have.)"
GROUP_CONTEXT_NOTE = "Recent messages in this group that were not addressed to you:"


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


@dataclass(frozen=True)
class TurnOutput:
    text: str
    usage: Usage
    tool_calls: tuple[ToolCall, ...]
    model: str
    calls: int


def envelope(row: MessageRow, timezone: ZoneInfo, is_group: bool) -> str:
    """How a stored user message is shown to the model (identical every time it is shown)."""
    when = datetime.fromtimestamp(row.created_at, timezone).strftime("%Y-%m-%d %H:%M %a")
    who = f" · {row.speaker}" if is_group and row.speaker else ""
    return f"[{when}{who}] {row.text}"


def history_window(rows: Sequence[MessageRow], max_chars: int) -> list[MessageRow]:
    """The newest messages that fit in ``max_chars``, oldest first, starting at a user turn."""
    kept: list[MessageRow] = []
    used = 0
    for row in reversed(rows):
        used += len(row.text)
        if used > max_chars and kept:
            break
        kept.append(row)
    kept.reverse()
    while kept and kept[0].role != "user":
        kept.pop(0)
    return kept


def build_messages(turn: TurnInput) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": turn.system_prompt}]
    for row in turn.history:
        if row.role == "user":
            content = envelope(row, turn.timezone, turn.is_group)
            messages.append({"role": "user", "content": content})
        else:
            messages.append({"role": "assistant", "content": row.text})
    if turn.transcript:
        messages.append({"role": "user", "content": turn.transcript})
    if turn.context:
        lines = [envelope(row, turn.timezone, True) for row in turn.context]
        messages.append({"role": "user", "content": "\n".join([GROUP_CONTEXT_NOTE, *lines])})
    for row in turn.new_messages:
        messages.append({"role": "user", "content": envelope(row, turn.timezone, turn.is_group)})
    return messages


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
            trimmed = TurnInput(
                turn.system_prompt,
                history_window(turn.history[len(turn.history) - keep :], 10**9),
                turn.new_messages,
                turn.context[-3:],
                turn.is_group,
                turn.timezone,
                None,
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
