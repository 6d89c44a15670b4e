"""Queue keys: a chat's messages are queued per partner that answers them, and each key's
pending messages are worked in order, one turn at a time, under one lease (bot.workers.worker).
A scene (a group with two or more bound partners) has one key for all its partners, so their
turns there run one after another, in order, on whichever worker holds it."""

from __future__ import annotations

OWNER_QUEUE = "@owner"
"""The partner part of the key of a chat's messages that no partner answers."""
SCENE_QUEUE = "@scene"
"""The partner part of the key of a scene's messages, whichever partner answers them."""


def queue_key(chat_key: str, partner_id: str | None) -> str:
    """The key of a chat's messages that ``partner_id`` answers."""
    return f"{chat_key}|{partner_id or OWNER_QUEUE}"


def scene_key(chat_key: str) -> str:
    """The one key of a scene's messages."""
    return f"{chat_key}|{SCENE_QUEUE}"


def is_scene_key(key: str) -> bool:
    return key.endswith(f"|{SCENE_QUEUE}")
