"""SillyTavern chat files (``.jsonl``), read as SillyTavern reads them: the first line is the
chat's header (``user_name``, ``character_name``, ``chat_metadata``), each line after it one
message (``name``, ``is_user``, ``is_system``, ``send_date``, ``mes``, ``swipes``,
``swipe_id``). The user's lines are the user's, every character's lines the partner's; of a
message's swipes the chosen one is kept (``mes`` is the one SillyTavern shows); system and
hidden lines (``is_system``) are left out, as SillyTavern leaves them out of the prompt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.cli.history_formats.messages import BadHistory, Choices, Imported, json_object
from bot.cli.history_formats.times import BadTime, parse_time


def read(path: Path, choices: Choices) -> Iterator[Imported]:
    with path.open(encoding="utf-8-sig") as file:
        header: dict[str, Any] = {}
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            record = json_object(number, line)
            if number == 1 and "mes" not in record:
                header = record
                continue
            message = _message(path, number, header, record, choices)
            if message is not None:
                yield message


def _message(
    path: Path, number: int, header: dict[str, Any], record: dict[str, Any], choices: Choices
) -> Imported | None:
    if record.get("is_system"):
        return None
    text = _chosen(record)
    if not text.strip():
        return None
    try:
        time = parse_time(record.get("send_date"))
    except BadTime as exc:
        raise BadHistory(f"line {number}: {exc}") from None
    metadata = header.get("chat_metadata")
    integrity = metadata.get("integrity") if isinstance(metadata, dict) else None
    conversation = f"sillytavern:{integrity or path.stem}"
    user = choices.as_user or str(header.get("user_name") or "User")
    return Imported(
        conversation=conversation,
        title=path.stem,
        user=user,
        role="user" if record.get("is_user") else "assistant",
        text=text,
        time=time,
        ident=f"{conversation}:{number}",
    )


def _chosen(record: dict[str, Any]) -> str:
    """The message's text: the swipe SillyTavern shows (``mes``), else ``swipes[swipe_id]``."""
    if isinstance(record.get("mes"), str) and record["mes"]:
        return str(record["mes"])
    swipes, chosen = record.get("swipes"), record.get("swipe_id")
    if isinstance(swipes, list) and isinstance(chosen, int) and 0 <= chosen < len(swipes):
        return str(swipes[chosen]) if isinstance(swipes[chosen], str) else ""
    return ""
