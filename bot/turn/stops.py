"""Stopping a running turn from its chat (Ctrl-C in the console): the model call is cancelled
and the turn answered with :data:`STOPPED`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

STOPPED = "(stopped)"
"""The answer to a turn its chat stopped (Ctrl-C in the console): a note, not the partner's."""


class TurnStopped(Exception):
    """The chat asked to stop the running turn."""


class TurnStops:
    """The stop switches of the turns running now, one per chat."""

    def __init__(self) -> None:
        self._stops: dict[str, asyncio.Event] = {}
        """Chat key -> set to stop the model call of the turn running there."""

    def stop(self, chat_key: str) -> bool:
        """Stop the turn running in this chat at once; False if none is running."""
        requested = self._stops.get(chat_key)
        if requested is None:
            return False
        requested.set()
        return True

    async def unless_stopped(self, chat_key: str, work: Awaitable[T]) -> T:
        """``work``, unless :meth:`stop` is called for this chat first: then it is cancelled
        and TurnStopped raised."""
        requested = self._stops[chat_key] = asyncio.Event()
        running = asyncio.ensure_future(work)
        stopping = asyncio.create_task(requested.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self._stops.get(chat_key) is requested:
                del self._stops[chat_key]
            stopping.cancel()
            if not running.done():
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        if running.cancelled() or (requested.is_set() and running.exception() is not None):
            raise TurnStopped  # what a cancelled model call raises on its way out is no news
        return running.result()
