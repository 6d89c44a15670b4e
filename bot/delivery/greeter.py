"""A character's greeting when a conversation begins: on picking the partner (``/partner``),
on ``/new`` and on ``/start``, before the user says anything.

The greeting is recorded as the partner's first message of a new session, so the model sees
it as history on the first turn, and delivered like any reply (as the partner, chunk by chunk,
retried in an outage).
"""

from __future__ import annotations

import asyncio
import logging

from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.store import NewMessage, Store
from bot.turn.sessions import Sessions, Speaker, audience_for
from partners.greetings import choose, filled, greetings_of
from partners.persona import Partner

logger = logging.getLogger(__name__)


class Greeter:
    def __init__(self, store: Store, sessions: Sessions, delivery: Delivery) -> None:
        self.store = store
        self.sessions = sessions
        self.delivery = delivery

    async def greet(self, chat_key: str, partner: Partner, speaker: Speaker) -> bool:
        """Open a conversation in this chat with the partner's next greeting; False if it
        has none (or a conversation is already open: a greeting never interrupts one)."""
        greetings = await asyncio.to_thread(greetings_of, partner)
        chat = await self.store.chat(chat_key)
        if not greetings or chat is None:
            return False
        if await self.store.open_session(chat_key, partner.id) is not None:
            return False
        before = await self.store.count_sessions(chat_key, partner.id)
        session = await self.sessions.current(chat, partner, speaker, None)
        text = filled(
            choose(greetings, partner.preset.greetings, before), partner.name, speaker.name
        )
        message_id = await self.store.add_message(
            NewMessage(
                chat_key=chat_key,
                role="assistant",
                text=text,
                audience=audience_for(chat, speaker),
                status="delivering",
                session_id=session.id,
                partner_id=partner.id,
                speaker=partner.name,
            )
        )
        assert message_id is not None
        logger.info("%s greets %s (greeting %d)", partner.id, chat_key, before)
        await self.delivery.send(PendingReply(message_id, chat, text, partner.id, None))
        return True
