"""Delivering a recorded reply, chunk by chunk, with each confirmed chunk recorded.

A chunk the platform confirmed is never sent again, also after a restart. A crash between the
platform's confirmation and our record can repeat that one chunk: platforms offer no
idempotency key (README, "Delivery guarantees"). Transient failures are retried with backoff,
honouring the platform's retry-after; a permanent failure is logged and the reply marked failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.base import Channel, DeliveryError, ReplyStream
from bot.events import ChatKind, ChatRef, Outbound
from bot.store import ChatRow, Store
from partners.checkins import SILENCE

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 6
BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 30.0

PartnerFace = Callable[[str], tuple[str, str | None] | None]
"""A partner id -> (name, avatar) as its replies show them, or None for an unknown partner."""


def chat_ref(row: ChatRow) -> ChatRef:
    kind: ChatKind = "dm" if row.kind == "dm" else "group"
    return ChatRef(row.platform, row.platform_chat_id, kind, row.thread_id, row.title)


@dataclass(frozen=True)
class PendingReply:
    """A recorded reply and everything needed to send it."""

    message_id: int
    chat: ChatRow
    text: str
    partner_id: str | None
    reply_to: str | None
    delivered_chunks: int = 0


class Delivery:
    def __init__(
        self, store: Store, channels: dict[str, Channel], partner_face: PartnerFace
    ) -> None:
        self.store = store
        self.channels = channels
        self.partner_face = partner_face
        self.on_unreachable: Callable[[ChatRow], Awaitable[None]] | None = None
        """Called when a platform says the user of a DM cannot be written to any more."""

    async def deliver(self, message_id: int, stream: ReplyStream | None = None) -> bool:
        """Send what is left of one reply; True when every chunk is confirmed.

        With a ``stream``, the live preview may become the first chunk itself."""
        row = await self.store.message(message_id)
        if row is None or row.status != "delivering":
            return row is not None and row.status == "delivered"
        chat = await self.store.chat(row.chat_key)
        if chat is None:
            logger.warning("reply %d: chat %s is gone", message_id, row.chat_key)
            return False
        answered = await self.store.answered_message(message_id)
        reply = PendingReply(
            message_id,
            chat,
            row.text,
            row.partner_id,
            answered.platform_message_id if answered else None,
            await self.store.delivered_chunks(message_id),
        )
        return await self.send(reply, stream)

    async def send(self, reply: PendingReply, stream: ReplyStream | None = None) -> bool:
        """Send a reply from its first unconfirmed chunk, recording each confirmed one."""
        message_id, chat = reply.message_id, reply.chat
        channel = self.channels.get(chat.platform)
        if channel is None:
            logger.warning("reply %d: no channel for %s; kept for later", message_id, chat.chat_key)
            return False
        text = reply.text.replace(SILENCE, "").strip()
        if not text:  # the model chose to say nothing: nothing is shown
            await self.store.mark_delivered(message_id)
            return True
        chunks = channel.split(text)
        done = reply.delivered_chunks
        if stream is not None and done == 0 and chunks:
            streamed_id = await stream.finish(chunks[0])
            if streamed_id is not None:
                await self.store.record_chunk(message_id, 0, streamed_id)
                done = 1
        face = self.partner_face(reply.partner_id) if reply.partner_id else None
        name, avatar = face if face else (None, None)
        for index in range(done, len(chunks)):
            outbound = Outbound(
                chat_ref(chat),
                chunks[index],
                reply.reply_to if index == 0 else None,
                reply.partner_id,
                name,
                partner_avatar=avatar,
            )
            try:
                platform_id = await self._send(channel, outbound)
            except DeliveryError as exc:
                logger.error("reply %d chunk %d not delivered: %s", message_id, index, exc)
                await self.store.mark_failed(message_id)
                if exc.unreachable and self.on_unreachable is not None:
                    await self.on_unreachable(chat)
                return False
            await self.store.record_chunk(message_id, index, platform_id)
        await self.store.mark_delivered(message_id)
        return True

    async def _send(self, channel: Channel, outbound: Outbound) -> str | None:
        delay = BACKOFF_SECONDS
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                return await channel.send(outbound)
            except DeliveryError as exc:
                if not exc.retryable or attempt == MAX_ATTEMPTS:
                    raise
                wait = exc.retry_after if exc.retry_after is not None else delay
                logger.warning("send failed (%s); retrying in %.1f s", exc, wait)
                await asyncio.sleep(min(wait, MAX_BACKOFF_SECONDS))
                delay = min(delay * 2, MAX_BACKOFF_SECONDS)
        raise AssertionError("unreachable")

    async def redeliver_pending(self) -> int:
        """After a restart: finish every reply that was recorded but not fully delivered."""
        rows = await self.store.undelivered()
        for row in rows:
            await self.deliver(row.id)
        return len(rows)
