"""What a turn leaves behind: the reply as it is recorded, recorded with the closing of the turn's
messages in one transaction, and as delivery sends it; and, for messages nobody can answer (their
chat or partner is gone), the one line that closes them. Running the turn is
``bot/turn/runner.py``."""

from __future__ import annotations

from collections.abc import Sequence

from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.store import Lease, MediaRow, MessageRow, NewMedia, NewMessage, NewUsage, SessionRow, Store
from bot.turn.conversation import Conversation
from bot.turn.sessions import audience_for
from bot.turn.stops import STOPPED
from partners.catalog import PartnerCatalog

PARTNER_GONE = (
    "The partner you wrote to ({partner}) is no longer here, so nobody read that message. "
    "Choose who to talk with (/partner), then write again."
)
"""Said instead of a reply to messages whose partner was deleted before their turn."""
PARTNER_BROKEN = (
    "The partner you wrote to ({partner}) cannot answer right now (its settings do not load); "
    "the owner can fix it. Write again later."
)
"""Said instead of a reply to messages whose partner does not load (a broken preset.yml)."""


async def close_orphans(
    store: Store,
    catalog: PartnerCatalog,
    delivery: Delivery,
    pending: list[MessageRow],
    lease: Lease,
) -> None:
    """Close messages nobody can answer. Those for a partner that is gone (deleted since
    they came) get one line saying so, never an answer from someone else."""
    last = pending[-1]
    chat = await store.chat(last.chat_key)
    partner_id = last.partner_id
    if partner_id is None or chat is None or catalog.get(partner_id) is not None:
        for row in pending:
            await store.set_status(row.id, "failed")
        return
    broken = partner_id in catalog.errors
    text = (PARTNER_BROKEN if broken else PARTNER_GONE).format(partner=partner_id)
    notice = NewMessage(
        chat_key=last.chat_key,
        role="notice",
        text=text,
        audience=last.audience,
        status="delivering",
        partner_id=last.partner_id,
        speaker="assistant",
    )
    ids = [row.id for row in pending]
    reply_id = await store.finish_turn(ids, None, notice, "failed", lease=lease)
    answered = last.platform_message_id
    await delivery.send(PendingReply(reply_id, chat, text, last.partner_id, answered, lease=lease))


def reply_message(
    conversation: Conversation,
    session: SessionRow,
    role: str,
    text: str,
    actions: tuple[NewMedia, ...],
) -> NewMessage:
    """The reply as it is recorded, before its delivery."""
    chat, partner = conversation.chat, conversation.partner
    return NewMessage(
        chat_key=chat.chat_key,
        role=role,
        text=text,
        audience=audience_for(chat, conversation.speaker),
        status="delivering",
        session_id=session.id,
        partner_id=partner.id if partner else None,
        speaker=partner.name if partner else "assistant",
        media=actions,
    )


async def record_turn(
    store: Store,
    pending: list[MessageRow],
    session: SessionRow,
    reply: NewMessage,
    usage: NewUsage | None,
    lease: Lease,
    follow: Sequence[NewMessage] = (),
) -> int:
    """The reply recorded and the turn's messages closed, in one transaction with the
    messages the reply causes (``follow``); a model that failed closes them as failed (a
    stopped turn is done)."""
    failed = reply.role == "notice" and reply.text != STOPPED
    return await store.finish_turn(
        [row.id for row in pending],
        session.id,
        reply,
        "failed" if failed else "done",
        usage=usage,
        lease=lease,
        follow=follow,
    )


def pending_reply(
    conversation: Conversation, reply_id: int, reply: NewMessage, last: MessageRow, lease: Lease
) -> PendingReply:
    """The recorded reply as delivery sends it, answering the turn's last message."""
    partner_id = conversation.partner.id if conversation.partner else None
    return PendingReply(
        reply_id,
        conversation.chat,
        reply.text,
        partner_id,
        last.platform_message_id,
        actions=tuple(MediaRow(reply_id, m.kind, m.ref) for m in reply.media),
        lease=lease,
    )
