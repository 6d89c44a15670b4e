"""ChatGPT's export, ``conversations.json``: a list of conversations, each a tree of messages
(``mapping``: node id to ``{message, parent, children}``) of which the app shows one branch,
the path from ``current_node`` up to the root. That branch is imported, oldest first; of its
messages the user's and the assistant's text parts (``content.parts``), never system, tool or
hidden ones. The file says nothing of who the user was: the owner, unless ``--as-user`` says.

The file is streamed (:mod:`.streaming`): read through once to check it is JSON within bounds
(a conversation may take :data:`MAX_CONVERSATION_BYTES`), then again one conversation at a
time, so a large export is never held whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bot.cli.history_formats.streaming as streaming
from bot.cli.history_formats.messages import OWNER, BadHistory, Choices, Imported
from bot.cli.history_formats.times import BadTime, parse_time

ROLES = ("user", "assistant")


MAX_CONVERSATION_BYTES = 64 * 1024 * 1024
"""The most of the file one conversation may take: its whole tree of messages is held while
its branch is chosen."""


def read(path: Path, choices: Choices) -> Iterator[Imported]:
    stamp = _checked(path)
    user = choices.as_user or OWNER
    conversations = streaming.items(path, "item", stamp)
    for number, conversation in enumerate(conversations, start=1):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("mapping"), dict):
            raise BadHistory(f"conversation {number}: no 'mapping' of messages")
        yield from _branch(number, conversation, user)


def _checked(path: Path) -> streaming.Stamp:
    """The file read through once: a JSON list, each conversation within bounds."""
    with streaming.opened(path, MAX_CONVERSATION_BYTES) as (source, stamp):
        seen = [0]

        def where() -> str:
            return f"conversation {seen[0]}"

        with streaming.refusals(path, source, where, "conversation"):
            events = streaming.bounded_events(source, {"item"}, {"item"})
            first = next(events)
            if first[1] != "start_array":
                raise BadHistory("expected ChatGPT's conversations.json (a JSON list)")
            for prefix, kind, _ in events:
                seen[0] += prefix == "item" and kind not in streaming.CLOSING
    return stamp


def _branch(number: int, conversation: dict[str, Any], user: str) -> Iterator[Imported]:
    ident = str(conversation.get("conversation_id") or conversation.get("id") or number)
    key = f"chatgpt:{ident}"
    for node in _chosen_path(conversation):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        role = (message.get("author") or {}).get("role")
        text = _text(message.get("content"))
        metadata = message.get("metadata") or {}
        if (
            role not in ROLES
            or not text.strip()
            or metadata.get("is_visually_hidden_from_conversation")
        ):
            continue
        try:
            time = parse_time(message.get("create_time") or conversation.get("create_time"))
        except BadTime as exc:
            raise BadHistory(f"conversation {number}, message {node.get('id')}: {exc}") from None
        yield Imported(
            conversation=key,
            title=str(conversation.get("title") or ""),
            user=user,
            role=role,
            text=text,
            time=time,
            ident=f"{key}:{node.get('id')}",
        )


def _chosen_path(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root to ``current_node``: the branch the app shows."""
    mapping: dict[str, Any] = conversation["mapping"]
    path: list[dict[str, Any]] = []
    node_id = conversation.get("current_node")
    seen: set[str] = set()
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)  # a loop in a damaged file ends the walk
        node = mapping[node_id]
        if not isinstance(node, dict):
            break
        path.append(node)
        node_id = node.get("parent")
    return path[::-1]


def _text(content: Any) -> str:
    """The text parts of a message's content, joined; images and other parts left out."""
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str))
    return str(content.get("text") or "")
