"""A recorded reply on its way out (:class:`PendingReply`), the chat and message it becomes for
a channel, and the record of each chunk the platform confirmed — what the sender
(``bot/delivery/sender.py``), its retries and its actions share."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.events import ChatKind, ChatRef, Outbound
from bot.store import ChatRow, Lease, MediaRow, StoreFull, StoreUnavailable

logger = logging.getLogger(__name__)

RECORD_PATIENCE_SECONDS = 30.0
"""How long the record of a chunk the platform confirmed is tried again while the database is
away (a restart takes seconds); given up, the chunk is sent again when the reply is finished."""
RECORD_FIRST_PAUSE_SECONDS = 0.2
RECORD_MAX_PAUSE_SECONDS = 5.0

PartnerFace = Callable[[str], tuple[str, str | None, bytes | None] | None]
"""Partner id -> (name, avatar URL, avatar image), or None for a partner that is gone."""
RecordChunk = Callable[..., Awaitable[None]]
"""The store's ``record_chunk`` or ``record_last_chunk``."""


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
    actions: tuple[MediaRow, ...] | None = None
    """Its reactions, stickers and ``speak`` (None: look them up in the store)."""
    lease: Lease | None = None
    """The lease of the turn that sends it, which fences every record of its delivery."""


def outbound(reply: PendingReply, text: str, reply_to: str | None, face: PartnerFace) -> Outbound:
    """One message of ``reply`` for its channel, signed with its partner's name and avatar."""
    found = face(reply.partner_id) if reply.partner_id else None
    name, avatar, image = found if found else (None, None, None)
    return Outbound(
        chat_ref(reply.chat),
        text,
        reply_to,
        reply.partner_id,
        name,
        partner_avatar=avatar,
        partner_avatar_image=image,
    )


async def record(
    write: RecordChunk, message_id: int, chunk: int, platform_id: str | None, lease: Lease | None
) -> None:
    """Record a chunk the platform confirmed, trying again while the database is away: a
    chunk left unrecorded would be sent again when the reply is finished. A lost lease is not
    waited out (the write raises LeaseLost), nor a full disk."""
    deadline = time.monotonic() + RECORD_PATIENCE_SECONDS
    pause = RECORD_FIRST_PAUSE_SECONDS
    while True:
        try:
            await write(message_id, chunk, platform_id, lease=lease)
            return
        except StoreFull:
            raise
        except StoreUnavailable as exc:
            if time.monotonic() + pause > deadline:
                raise
            logger.warning(
                "reply %d chunk %d sent but not recorded (%s); recording again in %.1f s",
                message_id,
                chunk,
                exc,
                pause,
            )
            await asyncio.sleep(pause)
            pause = min(pause * 2, RECORD_MAX_PAUSE_SECONDS)
