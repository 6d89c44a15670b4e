"""Per-session work queues: strict order inside a chat, bounded concurrency across chats.

The queue itself is rows in the store (inbound messages with ``status = 'pending'``); this
module only decides *when* a queue key is worked on. One worker task runs per key at a time and
keeps going while its key has pending rows, so messages that arrive during a turn coalesce into
the next turn. A semaphore bounds how many turns run at once. Recovery after a restart is the
same path: every key with pending rows is notified.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable

from bot.store import Store

logger = logging.getLogger(__name__)


class Worked(enum.Enum):
    """What one call of :data:`Process` did for its queue key."""

    IDLE = "nothing was pending"
    ANSWERED = "a turn ran"
    FAILED = "a turn raised; its messages were counted and run again while they are pending"


Process = Callable[[str], Awaitable[Worked]]
"""Work one turn of a queue key."""


class Dispatcher:
    def __init__(self, store: Store, process: Process, max_concurrent: int) -> None:
        self.store = store
        self._process = process
        self._slots = asyncio.Semaphore(max_concurrent)
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._closing = False
        self.turns_done = 0
        self.turns_failed = 0

    @property
    def active(self) -> int:
        return len(self._workers)

    def notify(self, queue_key: str) -> None:
        """Work on this key soon (a no-op if its worker is already running: it will see it)."""
        if self._closing:
            return
        if queue_key in self._workers:
            self._again.add(queue_key)
            return
        task = asyncio.create_task(self._work(queue_key), name=f"queue {queue_key}")
        self._workers[queue_key] = task

    async def _work(self, queue_key: str) -> None:
        try:
            while not self._closing:
                self._again.discard(queue_key)
                async with self._slots:
                    try:
                        worked = await self._process(queue_key)
                    except Exception:
                        # A turn that raised is counted by the turn runner (Worked.FAILED);
                        # what lands here could not even be counted (a database that refuses
                        # writes). One queue's failure must not stop the others: stop this
                        # key until the next message or a restart notifies it again.
                        self.turns_failed += 1
                        logger.exception("turn for %s failed", queue_key)
                        break
                if worked is Worked.FAILED:
                    self.turns_failed += 1
                elif worked is Worked.ANSWERED:
                    self.turns_done += 1
                elif queue_key not in self._again:
                    break
        finally:
            self._workers.pop(queue_key, None)

    async def recover(self) -> int:
        """Notify every key that still has pending messages (after a restart)."""
        keys = await self.store.pending_queue_keys()
        for key in keys:
            self.notify(key)
        return len(keys)

    async def idle(self) -> None:
        """Wait until no worker runs (tests and shutdown)."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def close(self, grace_seconds: float) -> None:
        """Stop taking work; let running turns finish for up to ``grace_seconds``."""
        self._closing = True
        tasks = list(self._workers.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
