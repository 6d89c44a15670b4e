"""Turns answered without the model: a partner resting over its budget or rate limit, and
voice notes nobody could transcribe. Each says one line, then stays quiet."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from bot.config.model import Config
from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.store import Lease, MessageRow, NewMessage, SessionRow, Store
from bot.turn.budget import Budget
from bot.turn.conversation import Conversation
from bot.turn.sessions import audience_for

logger = logging.getLogger(__name__)

VOICE_UNHEARD = (
    "Sorry — I can't listen to voice messages here right now. Could you write it for me?"
)
"""Said once a day per user when a voice note without a caption could not be transcribed."""


async def resting(
    budget: Budget | None,
    store: Store,
    delivery: Delivery,
    conversation: Conversation,
    session: SessionRow,
    pending: list[MessageRow],
    *,
    lease: Lease | None = None,
) -> bool:
    """Over a budget or rate limit: the resting line once, then quiet — no model call."""
    if budget is None:
        return False
    speaker = conversation.speaker
    rest = await budget.check(
        conversation.partner, conversation.chat.chat_key, speaker.user_key, speaker.is_owner
    )
    if rest is None:
        return False
    ids = [row.id for row in pending]
    logger.info("partner resting (%s) in %s", rest.reason, conversation.chat.chat_key)
    if rest.line is None:
        await store.close_unanswered(ids, session.id, lease=lease)
        return True
    partner = conversation.partner
    assert partner is not None  # only partners rest
    reply = NewMessage(
        chat_key=conversation.chat.chat_key,
        role="assistant",
        text=rest.line,
        audience=audience_for(conversation.chat, speaker),
        status="delivering",
        session_id=session.id,
        partner_id=partner.id,
        speaker=partner.name,
    )
    reply_id = await store.finish_turn(ids, session.id, reply, lease=lease)
    answered = pending[-1].platform_message_id
    await delivery.send(
        PendingReply(reply_id, conversation.chat, rest.line, partner.id, answered, lease=lease)
    )
    return True


async def unheard(
    store: Store,
    delivery: Delivery,
    config: Config,
    clock: Callable[[], float],
    conversation: Conversation,
    session: SessionRow,
    pending: list[MessageRow],
    *,
    lease: Lease | None = None,
) -> None:
    """Only voice notes nobody could transcribe: one polite line a day per user, then
    quiet — the notes stay in the conversation, unanswered."""
    ids = [row.id for row in pending]
    speaker = conversation.speaker
    now = datetime.fromtimestamp(clock(), config.owner_timezone())
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    told = await store.last_rest_notice("voice", speaker.user_key)
    if told is not None and told >= day_start:
        await store.close_unanswered(ids, session.id, lease=lease)
        return
    await store.note_rest_notice("voice", speaker.user_key)
    partner = conversation.partner
    reply = NewMessage(
        chat_key=conversation.chat.chat_key,
        role="notice",
        text=VOICE_UNHEARD,
        audience=audience_for(conversation.chat, speaker),
        status="delivering",
        session_id=session.id,
        partner_id=partner.id if partner else None,
        speaker=partner.name if partner else "assistant",
    )
    reply_id = await store.finish_turn(ids, session.id, reply, lease=lease)
    answered = pending[-1].platform_message_id
    await delivery.send(
        PendingReply(
            reply_id, conversation.chat, VOICE_UNHEARD, reply.partner_id, answered, lease=lease
        )
    )
