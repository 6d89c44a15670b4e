"""Delivering what a partner says first: check-ins and reminders, into the user's DM.

A check-in is recorded like a reply (in the DM's open session if there is one, so the next turn
sees it as history) and delivered through the same chunk-by-chunk path. When a platform says
the user cannot be written to (Telegram 403: blocked or never started the bot; Discord 50007:
DMs closed), check-ins are switched off for that user until they turn them on again.
"""

from __future__ import annotations

import logging

from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.store import ChatRow, NewMessage, Store
from partners.persona import Partner

logger = logging.getLogger(__name__)


class ProactiveSender:
    def __init__(self, store: Store, delivery: Delivery) -> None:
        self.store = store
        self.delivery = delivery

    async def send(self, partner: Partner, user_key: str, text: str, kind: str) -> bool:
        platform, _, user_id = user_key.partition(":")
        chat_key = f"{platform}:{user_id}"  # a DM's chat id is the user's id
        await self.store.upsert_chat(chat_key, platform, user_id, None, "dm", None)
        chat = await self.store.chat(chat_key)
        assert chat is not None
        session = await self.store.open_session(chat_key, partner.id)
        message_id = await self.store.add_message(
            NewMessage(
                chat_key=chat_key,
                role="assistant",
                text=text,
                audience=f"user:{user_key}",
                status="delivering",
                session_id=session.id if session else None,
                partner_id=partner.id,
                speaker=partner.name,
            )
        )
        assert message_id is not None
        logger.info("%s from %s to %s", kind, partner.id, user_key)
        return await self.delivery.send(PendingReply(message_id, chat, text, partner.id, None))


async def stop_checkins(store: Store, chat: ChatRow) -> None:
    """The platform refused a DM: stop writing first to that user, on every partner
    (:class:`bot.delivery.sender.Delivery` calls it, before any check-in is built)."""
    if chat.kind != "dm":
        return
    user_key = f"{chat.platform}:{chat.platform_chat_id}"
    for partner_id in await store.checkin_partners(user_key):
        await store.set_checkins(partner_id, user_key, False, "unreachable")
    logger.warning("%s cannot be written to; check-ins switched off", user_key)
