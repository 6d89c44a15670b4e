"""A review in a scene (a group with several bound partners) is written from the reviewed
partner's own point of view: its segment is what that partner heard and said in the group —
people's messages to anyone, the other partners' answers under their names, its own words —
rather than only the messages addressed to it (its session's). Each partner's review covers
its own session, so each partner writes its own journal entry of the same talk.

Only the group's own messages are read (what the partner's turns saw: ``bot/turn/scene_turns.py``),
never a DM; and a group session's review writes no one's per-user memory
(:func:`partners.review_edits.writable_files`). A partner's words handed to another as its turn
are the giver's answer again, and a message addressed to several partners is stored once for
each: both are shown once."""

from __future__ import annotations

from importlib import resources

from bot.store import ChatRow, MessageRow, Store
from partners.group_talk import group_talk

HEARD_ROWS = 300
"""How much of a group's talk one review reads at most (the newest, up to the segment's end)."""
UNHEARD = ("pending", "failed", "preempted")
"""Messages no partner heard: not answered yet, given up, or dropped for a person's message."""


def scene_note_template() -> str:
    return (resources.files("partners") / "prompts" / "review_scene.md").read_text("utf-8")


async def heard_segment(
    store: Store, chat: ChatRow | None, rows: list[MessageRow], after_id: int
) -> list[MessageRow] | None:
    """What the partner of a session heard and said in its group from ``after_id`` (its
    review's watermark) to the end of its segment ``rows``; None when the chat is no scene."""
    if chat is None or chat.kind == "dm" or not rows:
        return None
    if len(await store.bindings(chat.platform, chat.platform_chat_id)) < 2:
        return None
    talk = await store.chat_tail(chat.chat_key, after_id, HEARD_ROWS, rows[-1].id)
    return group_talk(row for row in talk if row.status not in UNHEARD)
