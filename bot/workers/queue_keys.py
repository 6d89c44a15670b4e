"""Queue keys: a chat's messages are queued per partner that answers them, and each key's
pending messages are worked in order, one turn at a time, under one lease (bot.workers.worker)."""

from __future__ import annotations

OWNER_QUEUE = "@owner"
"""The partner part of the key of a chat's messages that no partner answers."""


def queue_key(chat_key: str, partner_id: str | None) -> str:
    """The key of a chat's messages that ``partner_id`` answers."""
    return f"{chat_key}|{partner_id or OWNER_QUEUE}"
