"""The histories ``companion import`` reads, each as the app that wrote it reads it: the
project's own JSONL (:mod:`.jsonl`), SillyTavern chat files (:mod:`.sillytavern`), Telegram
Desktop's ``result.json`` (:mod:`.telegram`) and ChatGPT's ``conversations.json``
(:mod:`.chatgpt`). Each turns a file into :class:`Imported` messages one at a time, so a large
file is never held whole as messages; :func:`detect` tells the formats apart by their first
bytes. A file that cannot be read raises :class:`BadHistory` naming the line or message."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.cli.history_formats import chatgpt, jsonl, sillytavern, telegram
from bot.cli.history_formats.messages import BadHistory, Choices, Imported

FORMATS = ("jsonl", "sillytavern", "telegram", "chatgpt")
SNIFF_BYTES = 4096


def read(path: Path, format: str, choices: Choices) -> Iterator[Imported]:
    """The messages of the history at ``path`` in ``format`` (one of :data:`FORMATS`)."""
    readers = {
        "jsonl": jsonl.read,
        "sillytavern": sillytavern.read,
        "telegram": telegram.read,
        "chatgpt": chatgpt.read,
    }
    return readers[format](path, choices)


def detect(path: Path) -> str:
    """The format of the history at ``path``, from how it begins."""
    with path.open("rb") as file:
        head = file.read(SNIFF_BYTES).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if head.startswith("["):
        return "chatgpt"
    first = _first_object(head.split("\n", 1)[0])
    if first is not None:
        if "session" in first and "role" in first:
            return "jsonl"
        if {"user_name", "character_name", "chat_metadata", "mes"} & first.keys():
            return "sillytavern"
    if head.startswith("{") and ('"messages"' in head or '"chats"' in head):
        return "telegram"
    raise BadHistory(
        f"{path}: not a history this command knows; say which it is with --format "
        f"({', '.join(FORMATS)})"
    )


def _first_object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
