"""A person's yes before an MCP tool marked ``confirm`` runs (docs/tools.md).

The turn asks in the chat, showing the call and its arguments literally, with two buttons
where the channel has them (Telegram) and "answer yes or no" everywhere; the person's next
``yes`` or ``no`` in that chat answers it (the gateway hands it here before anything else,
``bot/gateway/inbound.py``) and is not a message to the partner. No answer within
:data:`CONFIRM_SECONDS`, or another question already waiting from that person, is a no. A
question is answered only on the worker whose turn asked it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from adapters.base import Channel, DeliveryError
from bot.events import ChatRef, Choice, Outbound

logger = logging.getLogger(__name__)

CONFIRM_SECONDS = 120.0
YES, NO = "yes", "no"


class Confirmations:
    """The questions waiting for a person's answer, by chat and person."""

    def __init__(self, channels: Mapping[str, Channel]) -> None:
        self.channels = channels
        self._waiting: dict[tuple[str, str], asyncio.Future[bool]] = {}

    async def ask(self, chat: ChatRef, user_key: str, question: str) -> bool:
        """Ask ``question`` in ``chat``; True once that person answers yes."""
        key = (chat.key, user_key)
        channel = self.channels.get(chat.platform)
        if channel is None or key in self._waiting:
            return False
        answered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[key] = answered
        try:
            text = f"{question}\n\nAnswer yes or no."
            await channel.send(Outbound(chat, text, choices=(Choice("Yes", YES), Choice("No", NO))))
            return await asyncio.wait_for(answered, CONFIRM_SECONDS)
        except TimeoutError:
            return False
        except DeliveryError as exc:
            logger.warning("could not ask for a confirmation in %s: %s", chat.key, exc)
            return False
        finally:
            self._waiting.pop(key, None)

    def answer(self, chat_key: str, user_key: str, text: str) -> bool:
        """Hand ``text`` to a question this person has waiting in this chat; True if it was
        the answer (``yes`` or ``no``), which then goes no further."""
        waiting = self._waiting.get((chat_key, user_key))
        word = text.strip().lower().rstrip(".!")
        if waiting is None or waiting.done() or word not in (YES, NO):
            return False
        waiting.set_result(word == YES)
        return True
