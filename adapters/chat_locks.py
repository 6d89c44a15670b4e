"""One lock per chat, so each chat's events reach the gateway in the order they came.

Chat libraries run every event in a task of its own (discord.py does): two messages of one
chat could otherwise overtake each other on their way to the store. Taking the chat's lock is
the first thing an event handler does, and asyncio's locks serve waiters in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator


class ChatLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: Counter[str] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._holders[key] += 1
        try:
            async with lock:
                yield
        finally:
            self._holders[key] -= 1
            if not self._holders[key]:  # nobody waits: forget it, chats come and go
                del self._holders[key], self._locks[key]
