"""A reply's actions, done before its first chunk, once each: the reactions and stickers of its
markers and, for a voice reply, the voice message. A spoken reply goes out as a voice message
carrying its text as caption — that message is then its first chunk — or, when the text is
longer than a caption, followed by the text; if speaking fails the text goes alone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from adapters.base import Channel, DeliveryError, MediaChannel
from bot.delivery.reply import PartnerFace, PendingReply, chat_ref, outbound, record
from bot.store import ChatRow, Lease, MediaRow, Store
from bot.text.utf16 import utf16_len
from bot.turn.voice_replies import VoiceReplies

logger = logging.getLogger(__name__)

Ensure = Callable[[Lease | None], Awaitable[None]]
"""Raises LeaseLost unless the turn's lease (if any) is still this worker's."""


class ReplyActions:
    def __init__(
        self, store: Store, voice: VoiceReplies | None, face: PartnerFace, ensure: Ensure
    ) -> None:
        self.store = store
        self.voice = voice
        self.face = face
        self.ensure = ensure

    async def do(self, reply: PendingReply, channel: Channel, text: str, chunks: list[str]) -> int:
        """Reactions, stickers and the voice message, each once; returns how many chunks the
        voice message delivered (1 when it carried the whole text as its caption)."""
        actions = reply.actions
        if actions is None:
            actions = tuple(
                (await self.store.media_for([reply.message_id])).get(reply.message_id, [])
            )
        pending = [a for a in actions if a.state == "new"]
        if not pending or not isinstance(channel, MediaChannel):
            return 0
        chat = chat_ref(reply.chat)
        done = 0
        for action in pending:
            try:
                if action.kind == "react" and reply.reply_to:
                    await channel.react(chat, reply.reply_to, action.ref, reply.partner_id)
                elif action.kind == "sticker":
                    await channel.send_sticker(chat, action.ref, reply.partner_id)
                elif action.kind == "speak" and text:
                    done = await self._speak(reply, channel, text, chunks)
            except DeliveryError as exc:  # an action is a courtesy: the text still goes out
                logger.warning("reply %d: %s not done: %s", reply.message_id, action.kind, exc)
            await self._done(reply.message_id, action)
        return done

    async def _done(self, message_id: int, action: MediaRow) -> None:
        await self.store.set_media_state(message_id, action.kind, action.ref, "done")

    async def _speak(
        self, reply: PendingReply, channel: MediaChannel, text: str, chunks: list[str]
    ) -> int:
        if self.voice is None:
            return 0
        # "recording a voice message…" is shown while the reply is spoken, not before it
        _, audio = await asyncio.gather(
            self._recording(channel, reply.chat, reply.partner_id),
            self.voice.audio(text, reply.partner_id),
        )
        if audio is None:
            return 0
        whole = len(chunks) == 1 and utf16_len(text) <= channel.caption_limit
        message = outbound(reply, text if whole else "", reply.reply_to, self.face)
        await self.ensure(reply.lease)
        voice_id = await channel.send_voice(message, audio)
        if not whole:
            return 0
        await record(self.store.record_chunk, reply.message_id, 0, voice_id, reply.lease)
        return 1

    @staticmethod
    async def _recording(channel: MediaChannel, chat: ChatRow, partner_id: str | None) -> None:
        with contextlib.suppress(DeliveryError):  # a courtesy: the reply goes out regardless
            await channel.recording(chat_ref(chat), partner_id)
