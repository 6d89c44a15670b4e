"""Direct sends outside a reply's recorded path: command answers, notices to a user, and the
owner's notices — a DM on the platform the matter arose on if the owner has an id there, else
on the first connected platform where they do.

Built first among the parts that talk (``bot/app/build.py``): delivery, reviews and the gateway
all tell the owner things, so each is handed this in its constructor.
"""

from __future__ import annotations

import logging

from adapters.base import Channel, DeliveryError
from bot.events import ChatRef, Choice, Outbound
from bot.gateway.access import OwnerCheck

logger = logging.getLogger(__name__)


class Notices:
    def __init__(self, channels: dict[str, Channel], is_owner: OwnerCheck) -> None:
        self.channels = channels
        self.is_owner = is_owner

    async def reply(
        self,
        chat: ChatRef,
        text: str,
        reply_to: str | None = None,
        choices: tuple[Choice, ...] = (),
    ) -> None:
        """``text`` in as many chunks as the platform needs, the ``choices`` on the last;
        a refusal is logged and the rest dropped (a notice is not retried)."""
        channel = self.channels.get(chat.platform)
        if channel is None:
            return
        chunks = channel.split(text)
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            outbound = Outbound(
                chat, chunk, reply_to if index == 0 else None, choices=choices if last else ()
            )
            try:
                await channel.send(outbound)
            except DeliveryError as exc:
                logger.warning("notice to %s not delivered: %s", chat.key, exc)
                return

    async def notify_user(self, user_key: str, text: str) -> None:
        platform, _, user_id = user_key.partition(":")
        await self.reply(ChatRef(platform, user_id, "dm"), text)

    async def notify_owner(self, platform: str, text: str) -> None:
        """Tell the owner in a DM: on this platform if they have an id there, else on the
        first connected platform where they do."""
        keys = sorted(self.is_owner.keys, key=lambda k: not k.startswith(f"{platform}:"))
        for key in keys:
            if key.partition(":")[0] in self.channels:
                await self.notify_user(key, text)
                return
        logger.warning("owner notice not delivered (no owner id configured): %s", text)
