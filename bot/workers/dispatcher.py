"""Per-session work queues: strict order inside a chat, bounded concurrency across chats.

The queue itself is rows in the store (inbound messages with ``status = 'pending'``); this
module only decides *when* a queue key is worked on. One task runs per key at a time and keeps
going while its key has pending rows, so messages that arrive during a turn coalesce into the
next turn. A key's task holds a turn slot from its claim until its lease is handed back, so
no more keys are in hand than turns may run at once (``max_concurrent``).

A key is worked only under a lease (:mod:`bot.workers.worker`). Every worker hears of every
stored message; one with a free slot claims the key at once, and leaves it alone if another
worker holds it (that worker sees the message). One with every slot taken leaves it to
workers with room and remembers that something waits: when one of its slots frees, it claims
keys nobody holds that have pending messages (:meth:`Leases.sweep`, as the heartbeat's sweep
does), as many as it has room for. Several workers share the chats only as well as that
holds: a key claimed with no slot for it waits here, held, and in a running conversation its
next message finds it still held, so a worker that once claimed too many (a burst of messages
heard together) kept them while the others stood idle.

The lease goes with every turn, whose writes it fences, and is handed back to the worker when
nothing is pending: kept a little for the conversation's next message while nothing waits for
a slot here, given back at once otherwise (and so is a kept lease whose key's next message
comes while every slot is taken), so that message goes to a worker with room. A turn that
finds its lease taken over stops, and the key is left to the new holder. A key the worker's
sweep claimed arrives already leased (:meth:`Dispatcher.adopt`). Recovery after a restart is
the same path: the worker's first sweep claims every key with pending rows or with a reply
whose delivery was cut off, which the key's turn finishes first.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from bot.services.fault_log import FaultLog
from bot.store import Lease, Store

logger = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
"""A key whose turn could not even be counted (the database away) is tried again after
these pauses, doubling while it keeps failing."""


class Worked(enum.Enum):
    """What one call of :data:`Process` did for its queue key."""

    IDLE = "nothing was pending"
    ANSWERED = "a turn ran"
    DELIVERED = "replies whose delivery was cut off were finished; pending messages wait"
    FAILED = "a turn raised; its messages were counted and run again while they are pending"
    LOST = "another worker took the key over; its turns are that worker's now"


Process = Callable[[Lease], Awaitable[Worked]]
"""Work one turn of the queue key a lease is held on."""


class Leases(Protocol):
    """Where the dispatcher gets and gives back its leases (:class:`bot.workers.worker.Worker`)."""

    async def claim(self, queue_key: str) -> Lease | None: ...

    async def release(self, lease: Lease) -> None:
        """Nothing is pending: keep the lease idle a little, for the key's next message."""

    async def give_back(self, lease: Lease) -> None:
        """Nothing is pending and there is no room for the key's next message: let it go."""

    def kept(self, queue_key: str) -> Lease | None:
        """The lease kept idle on this key since its last turn, if any."""

    async def sweep(self) -> int:
        """Claim keys nobody holds that have pending messages, as many as there is room for,
        and hand them to :meth:`Dispatcher.adopt`; how many."""

    def forget(self, lease: Lease) -> None: ...


class Dispatcher:
    def __init__(self, store: Store, process: Process, max_concurrent: int, leases: Leases) -> None:
        self.store = store
        self._process = process
        self._max_concurrent = max_concurrent
        self._slots = asyncio.Semaphore(max_concurrent)
        self._missed = False
        """A message was heard while every slot was taken: when one frees, claim what waits."""
        self._sweeping: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._adopted: dict[str, Lease] = {}
        self._backoff: dict[str, float] = {}
        self._closing = False
        self._leases = leases
        self._faults = FaultLog("the dispatcher", logger)
        self.turns_done = 0
        self.turns_failed = 0

    @property
    def active(self) -> int:
        return len(self._workers)

    @property
    def free_slots(self) -> int:
        """How many more keys could be worked at once (what a sweep claims at most)."""
        return max(0, self._max_concurrent - len(self._workers))

    def notify(self, queue_key: str) -> None:
        """Work on this key soon (a no-op if its task is already running: it will see it).
        With every slot taken the key is left to workers with room (they hear of it too);
        this worker claims what waits once a slot of its own frees."""
        if self._closing:
            return
        if queue_key in self._workers:
            self._again.add(queue_key)
            return
        if self.free_slots <= 0:
            self._missed = True
            kept = self._leases.kept(queue_key)
            if kept is not None:  # held here idle, no other worker could take it
                self._give_back_soon(kept)
            return
        self._start(queue_key)

    def adopt(self, lease: Lease) -> None:
        """Work on a key already leased to this worker (claimed by its sweep, for a free
        slot)."""
        if self._closing:
            return
        self._adopted[lease.queue_key] = lease
        if lease.queue_key in self._workers:
            self._again.add(lease.queue_key)
        else:
            self._start(lease.queue_key)

    def _start(self, queue_key: str) -> None:
        task = asyncio.create_task(self._work(queue_key), name=f"queue {queue_key}")
        self._workers[queue_key] = task

    async def _work(self, queue_key: str) -> None:
        lease: Lease | None = None
        try:
            while not self._closing:
                self._again.discard(queue_key)
                async with self._slots:
                    lease = await self._lease(queue_key)
                    if lease is None:
                        if queue_key in self._adopted:
                            continue  # the sweep claimed it while this task asked for it
                        break  # another worker holds it: its task sees the new message
                    if await self._drain(lease):
                        await self._hand_back(lease)
                # a message stored (or a lease adopted) while the lease was given back
                if queue_key not in self._again and queue_key not in self._adopted:
                    break
            self._faults.succeeded()
        except Exception as exc:
            # What lands here could not even be counted (a database that went away, or
            # refuses writes). One queue's failure must not stop the others, and the key must
            # not wait for a message that may never come: its lease is kept idle (the
            # heartbeat gives it back if nothing uses it) and the key is tried again after a
            # pause that doubles while it keeps failing. An outage fails every key's task:
            # logged once for all of them, until one of them gets through.
            self.turns_failed += 1
            self._faults.failed(exc, about=f"turn for {queue_key}")
            if lease is not None:
                await self._leases.release(lease)
            self._retry_later(queue_key)
        finally:
            self._workers.pop(queue_key, None)
            self._room()

    async def _hand_back(self, lease: Lease) -> None:
        """Nothing is pending on the key: keep its lease idle for the next message, unless
        other keys wait for the slot it frees (the next message then goes to a worker with
        room instead of waiting here, held)."""
        if self._missed:
            await self._leases.give_back(lease)
        else:
            await self._leases.release(lease)

    def _give_back_soon(self, lease: Lease) -> None:
        task = asyncio.create_task(self._leases.give_back(lease), name="give a lease back")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _room(self) -> None:
        """A slot freed: if messages were heard while every slot was taken, claim keys that
        wait (one sweep at a time; it claims as many as there is room for by then)."""
        if self._missed and not self._closing and self._sweeping is None:
            self._sweeping = asyncio.create_task(self._take_missed(), name="claim what waits")

    async def _take_missed(self) -> None:
        try:
            while self._missed and self.free_slots > 0 and not self._closing:
                self._missed = False
                room = self.free_slots
                if await self._leases.sweep() < room:
                    break  # nothing else waits unheld (another message sets it again)
                self._missed = True  # every slot filled: more may wait
        except Exception as exc:  # the heartbeat's sweep claims them later
            self._faults.failed(exc, about="claiming the keys that wait")
        finally:
            self._sweeping = None

    def _retry_later(self, queue_key: str) -> None:
        delay = self._backoff.get(queue_key, RETRY_FIRST_SECONDS)
        self._backoff[queue_key] = min(delay * 2, RETRY_MAX_SECONDS)
        asyncio.get_running_loop().call_later(delay, self.notify, queue_key)

    async def _lease(self, queue_key: str) -> Lease | None:
        """The key's lease, claimed now (in a turn slot already) unless the sweep's came.

        A sweep of this worker's may claim the key while this claim waits, and adopt that
        lease for this very task; the claim then takes the key over from it. Only the newer
        lease is worked: a turn under the older would be refused as taken over."""
        adopted = self._adopted.pop(queue_key, None)
        if adopted is not None:
            return adopted
        claimed = await self._leases.claim(queue_key)
        adopted = self._adopted.pop(queue_key, None)
        if claimed is None or adopted is None:
            return claimed or adopted
        return max(claimed, adopted, key=lambda lease: lease.epoch)

    async def _drain(self, lease: Lease) -> bool:
        """Run turns while the key has pending messages; False if the lease was lost."""
        queue_key = lease.queue_key
        while not self._closing:
            self._again.discard(queue_key)
            worked = await self._process(lease)
            if worked is Worked.LOST:
                logger.warning("queue %s: taken over by another worker", queue_key)
                self._leases.forget(lease)
                return False
            if worked is Worked.FAILED:
                self.turns_failed += 1
            elif worked is Worked.ANSWERED:
                self.turns_done += 1
                self._backoff.pop(queue_key, None)
            elif worked is Worked.DELIVERED:
                self._backoff.pop(queue_key, None)
            elif queue_key not in self._again:
                return True
        return True

    async def idle(self) -> None:
        """Wait until no task runs (tests and shutdown)."""
        while self._workers or self._sweeping is not None:
            running = [*self._workers.values(), *([self._sweeping] if self._sweeping else [])]
            await asyncio.gather(*running, return_exceptions=True)

    async def close(self, grace_seconds: float) -> None:
        """Stop taking work; let running turns finish for up to ``grace_seconds``."""
        self._closing = True
        if self._sweeping is not None:
            self._sweeping.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        tasks = list(self._workers.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace_seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
