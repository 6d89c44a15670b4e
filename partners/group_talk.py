"""A group's talk as the people in it saw it, from the rows the store keeps of it.

A message addressed to several partners is stored once for each of them, and a partner's words
handed to another partner as its turn are stored again, as that turn's message
(``bot/turn/scene_turns.py``): neither is a message of its own. Whoever reads a group's talk
back — the speak gate deciding who speaks, a review writing one partner's journal — reads each
message once."""

from __future__ import annotations

from collections.abc import Iterable

from bot.store import MessageRow

HANDED_OVER = "partner:"
"""The ``user_key`` prefix of a partner's words handed to another partner as its turn."""


def group_talk(rows: Iterable[MessageRow]) -> list[MessageRow]:
    """``rows`` (a group's, oldest first) with each message once: hand-overs left out, a
    person's message kept the first time it is stored."""
    seen: set[tuple[str, str | None]] = set()
    kept = []
    for row in rows:
        if (row.user_key or "").startswith(HANDED_OVER):
            continue
        if row.platform_message_id and row.role != "assistant":
            voice = (row.platform_message_id, row.user_key)
            if voice in seen:
                continue
            seen.add(voice)
        kept.append(row)
    return kept
