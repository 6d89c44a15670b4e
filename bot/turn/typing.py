"""What a chat sees while a turn runs: the typing indicator and the streamed reply preview."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from adapters.base import Channel, ReplyStream
from bot.delivery.reply import chat_ref
from bot.services.llm import Delta
from bot.store import ChatRow
from bot.text import markers

TYPING_DELAY_SECONDS = 0.5
"""A reply faster than this needs no typing indicator (and the platform one call less)."""
TYPING_REFRESH_SECONDS = 4.5


@contextlib.asynccontextmanager
async def typing(
    channels: dict[str, Channel], chat: ChatRow, partner_id: str | None = None
) -> AsyncIterator[None]:
    """Show the chat's typing indicator (``partner_id``'s, where it has an account of its
    own) while the block runs (none for a chat without a channel)."""
    channel = channels.get(chat.platform)
    if channel is None:
        yield
        return
    ref = chat_ref(chat)

    async def refresh() -> None:
        await asyncio.sleep(TYPING_DELAY_SECONDS)
        while True:
            with contextlib.suppress(Exception):
                await channel.typing(ref, partner_id)
            await asyncio.sleep(TYPING_REFRESH_SECONDS)

    task = asyncio.create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def accumulate(stream: ReplyStream) -> Delta:
    """Turn model deltas into "the whole text so far" for a reply stream."""
    parts: list[str] = []

    async def on_delta(delta: str) -> None:
        parts.append(delta)
        await stream.push(markers.strip_preview("".join(parts)))

    return on_delta
