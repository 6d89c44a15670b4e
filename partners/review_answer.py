"""The model's answer to a review: one JSON-mode call, its JSON read defensively and cleaned,
and the journal entry, memory operations and dated reminders taken out of it.

Consolidation (:mod:`partners.consolidate`) asks for its JSON the same way.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.services.llm import LLMClient, storable
from bot.store import Store
from partners.journal import JournalEntry

MAX_ANSWER_DEPTH = 8
"""An answer nests 4 levels at most (answer, memory list, operation, value); deeper is broken."""


class ReviewOutputError(ValueError):
    """The model's answer was not the JSON a review needs."""


def json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer, read defensively: code fences or prose around it."""
    if not text.strip():
        raise ReviewOutputError("empty answer")
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ReviewOutputError("no JSON object in the answer")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ReviewOutputError(f"invalid JSON ({exc.msg})") from exc
    except RecursionError as exc:
        raise ReviewOutputError("the JSON is nested too deeply") from exc
    if not isinstance(data, dict):
        raise ReviewOutputError("the answer is not a JSON object")
    return cleaned(data)


def cleaned(value: Any, depth: int = 0) -> Any:
    """``value`` with every text storable: a ``\\ud83d`` escape decodes to a lone surrogate,
    which no file or database can hold, so it becomes U+FFFD before anything is written.
    Nesting deeper than an answer needs is refused here rather than breaking a writer later."""
    if depth > MAX_ANSWER_DEPTH:
        raise ReviewOutputError("the JSON is nested too deeply")
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [cleaned(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {storable(key): cleaned(item, depth + 1) for key, item in value.items()}
    return value


async def ask_for_json(
    llm: LLMClient, store: Store, partner_id: str, model: str, prompt: str, usage_day: str
) -> dict[str, Any]:
    """One JSON-mode call on behalf of memory upkeep, its tokens counted as "review" on
    ``usage_day`` (the owner's calendar, :meth:`Config.usage_day`, not the partner's)."""
    completion = await llm.complete(
        [{"role": "user", "content": prompt}], model=model, json_mode=True
    )
    await store.add_usage(
        usage_day,
        partner_id,
        "review",
        completion.model,
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
    )
    return json_object(completion.text)


def parse_review(data: dict[str, Any]) -> tuple[JournalEntry | None, list[dict[str, Any]]]:
    """The journal entry and memory operations of a review's answer; missing parts are empty."""
    journal = None
    raw = data.get("journal")
    if isinstance(raw, dict) and isinstance(raw.get("summary"), str) and raw["summary"].strip():

        def items(key: str) -> list[str]:
            value = raw.get(key) or []
            return [str(v) for v in value if str(v).strip()] if isinstance(value, list) else []

        journal = JournalEntry(
            raw["summary"], items("discussed"), items("facts"), items("feelings")
        )
    ops = data.get("memory") or []
    if not isinstance(ops, list):
        raise ReviewOutputError("'memory' must be a list of operations")
    return journal, [op for op in ops if isinstance(op, dict)]


def parse_reminders(data: dict[str, Any], today: str) -> list[tuple[str, str]]:
    """(date, about) pairs from the review's answer: future dates only, short texts."""
    raw = data.get("reminders")
    found = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict):
            continue
        day, about = str(item.get("date", "")), " ".join(str(item.get("about", "")).split())
        try:
            valid = datetime.fromisoformat(day).date().isoformat() == day
        except ValueError:
            valid = False
        if valid and day >= today and about:
            found.append((day, about[:120]))
    return found
