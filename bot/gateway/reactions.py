"""A user's reaction to one of a partner's replies, kept as context for the partner's next
turn in that chat. No model call: nothing is answered now. Reactions to other messages, and
from people who may not talk here, are not kept. The reacting person is named as stored when
they last wrote, if they did (a channel may know only their id)."""

from __future__ import annotations

from bot.events import Reaction
from bot.store import NewMessage, Store

REACTION_SNIPPET_CHARS = 80


async def keep_reaction(store: Store, reaction: Reaction) -> None:
    chat, sender = reaction.chat, reaction.sender
    reply = await store.reply_for_platform_message(chat.key, reaction.message_id)
    if reply is None:
        return
    user = await store.user(sender.key)
    if user is not None and user["access"] == "blocked":
        return
    name = user["display_name"] if user is not None else sender.display_name
    snippet = " ".join(reply.text.split())[:REACTION_SNIPPET_CHARS]
    await store.add_message(
        NewMessage(
            chat_key=chat.key,
            role="reaction",
            text=f"{name} reacted {reaction.emoji} to your message “{snippet}”",
            audience=reply.audience,
            dedup_key=f"{chat.platform}:{chat.chat_id}:reaction:{reaction.message_id}"
            f":{sender.user_id}:{reaction.emoji}",
            partner_id=reply.partner_id,
            user_key=sender.key,
            speaker=name,
            created_at=reaction.time.timestamp(),
        )
    )
