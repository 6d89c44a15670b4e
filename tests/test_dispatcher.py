"""The dispatcher's own promises, apart from any store: a queue key whose turn raised before
it could even be counted (the database went away mid-turn) is worked again by itself, without
waiting for a new message or a restart (docs/architecture.md "Nothing stays pending forever")."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable

from bot.store import Lease
from bot.workers.dispatcher import Dispatcher, Worked

KEY = "test:1|example"


class OneLease:
    """The worker's side of leases, for keys that nobody else wants: a key heard of
    (:meth:`hear`) waits, unheld, until a claim or a sweep takes it."""

    def __init__(self) -> None:
        self.released: list[Lease] = []
        self.given_back: list[Lease] = []
        self.waiting: list[str] = []
        self.idle: dict[str, Lease] = {}
        self.dispatcher: Dispatcher | None = None

    def hear(self, dispatcher: Dispatcher, queue_key: str) -> None:
        """A message for ``queue_key`` was stored (by any worker): this one hears of it."""
        self.dispatcher = dispatcher
        self.waiting.append(queue_key)
        dispatcher.notify(queue_key)

    async def claim(self, queue_key: str) -> Lease | None:
        if queue_key in self.waiting:
            self.waiting.remove(queue_key)
        return self.idle.pop(queue_key, None) or Lease(queue_key, "w1", 1, 0.0)

    async def release(self, lease: Lease) -> None:
        self.released.append(lease)
        self.idle[lease.queue_key] = lease

    async def give_back(self, lease: Lease) -> None:
        self.given_back.append(lease)
        self.idle.pop(lease.queue_key, None)

    def kept(self, queue_key: str) -> Lease | None:
        return self.idle.get(queue_key)

    async def sweep(self) -> int:
        assert self.dispatcher is not None
        taken = self.waiting[: self.dispatcher.free_slots]
        for queue_key in taken:
            self.waiting.remove(queue_key)
            self.dispatcher.adopt(Lease(queue_key, "w1", 1, 0.0))
        return len(taken)

    def forget(self, lease: Lease) -> None:
        pass


async def test_a_turn_that_raised_uncounted_is_worked_again_without_a_new_message() -> None:
    calls: list[str] = []
    answered = asyncio.Event()

    async def process(lease: Lease) -> Worked:
        calls.append(lease.queue_key)
        if len(calls) == 1:
            raise ConnectionError("the database went away")
        if len(calls) == 2:
            answered.set()
            return Worked.ANSWERED
        return Worked.IDLE

    leases = OneLease()
    # the store is read only by recover(), which this test does not call
    dispatcher = Dispatcher(None, process, 4, leases)  # type: ignore[arg-type]
    leases.hear(dispatcher, KEY)
    await asyncio.wait_for(answered.wait(), timeout=30)
    await dispatcher.idle()
    assert calls[:2] == [KEY, KEY]
    assert dispatcher.turns_failed == 1 and dispatcher.turns_done == 1
    # the failed turn's lease was given back to the worker (kept idle, not held forever)
    assert leases.released and leases.released[0].queue_key == KEY
    await dispatcher.close(1)


class Claims(OneLease):
    """Records which keys were claimed, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.claimed: list[str] = []

    async def claim(self, queue_key: str) -> Lease | None:
        self.claimed.append(queue_key)
        await asyncio.sleep(0)  # a round trip to the database: other tasks run meanwhile
        return await super().claim(queue_key)


async def test_a_worker_with_every_turn_slot_busy_claims_no_more_keys_until_one_frees() -> None:
    """Several workers share the chats: a worker whose turn slots are all busy leaves a newly
    stored message's key unclaimed (another worker with room hears of it and takes it), and
    claims it itself only once a slot of its own is free."""
    first_running, finish_first = asyncio.Event(), asyncio.Event()
    worked: list[str] = []

    async def process(lease: Lease) -> Worked:
        if lease.queue_key in worked:
            return Worked.IDLE
        worked.append(lease.queue_key)
        if lease.queue_key == "test:1|example":
            first_running.set()
            await finish_first.wait()
        return Worked.ANSWERED

    claims = Claims()
    dispatcher = Dispatcher(None, process, 1, claims)  # type: ignore[arg-type]
    claims.hear(dispatcher, "test:1|example")
    await asyncio.wait_for(first_running.wait(), timeout=30)
    claims.hear(dispatcher, "test:2|example")
    for _ in range(20):  # give the second key's task every chance to claim
        await asyncio.sleep(0)
    claimed_while_busy = list(claims.claimed)
    finish_first.set()
    await asyncio.wait_for(dispatcher.idle(), timeout=30)
    assert claimed_while_busy == ["test:1|example"]
    assert worked == ["test:1|example", "test:2|example"]
    await dispatcher.close(1)


async def test_a_burst_of_stored_messages_puts_no_more_keys_in_hand_than_turn_slots() -> None:
    """Another worker stores many messages at once and this one hears of them together: it
    claims as many keys as it has turn slots, and each further key only once a slot is free.
    A key claimed beyond its slots would wait here, held, while workers with room stand idle
    (and keep waiting: a closed conversation's next message finds its key still held)."""
    release = asyncio.Event()
    running: list[str] = []

    async def process(lease: Lease) -> Worked:
        if lease.queue_key in running:
            return Worked.IDLE
        running.append(lease.queue_key)
        await release.wait()
        return Worked.ANSWERED

    claims = Claims()
    dispatcher = Dispatcher(None, process, 2, claims)  # type: ignore[arg-type]
    keys = [f"test:{n}|example" for n in range(5)]
    for key in keys:  # heard at once, before any key's task ran
        claims.hear(dispatcher, key)
    await until(lambda: len(running) == 2)
    for _ in range(20):  # give the other keys' tasks every chance to claim
        await asyncio.sleep(0)
    claimed_while_busy = list(claims.claimed)
    release.set()
    await asyncio.wait_for(dispatcher.idle(), timeout=30)
    assert claimed_while_busy == keys[:2]  # the other three were swept as slots freed
    assert sorted(running) == keys
    await dispatcher.close(1)


async def test_a_key_done_while_others_wait_for_a_slot_gives_its_lease_back_at_once() -> None:
    """A lease is kept idle after its key's turn (the conversation's next message then needs no
    claim) only while the worker has room for that message: when other keys wait for a turn
    slot, it goes back at once, so the next message goes to a worker with room instead of
    waiting here for a slot behind the others while no other worker may take it."""
    finish: dict[str, asyncio.Event] = {}
    started: list[str] = []

    async def process(lease: Lease) -> Worked:
        if lease.queue_key in started:
            return Worked.IDLE
        started.append(lease.queue_key)
        finish[lease.queue_key] = event = asyncio.Event()
        await event.wait()
        return Worked.ANSWERED

    leases = OneLease()
    dispatcher = Dispatcher(None, process, 1, leases)  # type: ignore[arg-type]
    leases.hear(dispatcher, "test:1|example")
    await until(lambda: "test:1|example" in finish)
    leases.hear(dispatcher, "test:2|example")  # waits for the one slot
    finish["test:1|example"].set()
    await until(lambda: "test:2|example" in finish)
    assert [lease.queue_key for lease in leases.given_back] == ["test:1|example"]
    assert leases.released == []
    finish["test:2|example"].set()
    await asyncio.wait_for(dispatcher.idle(), timeout=30)
    await dispatcher.close(1)


async def test_a_kept_lease_whose_next_message_finds_no_free_slot_is_given_back() -> None:
    """A conversation's lease was kept idle after its turn, and its next message comes while
    another key has taken the slot: the lease goes back at once (no other worker could take
    the message while it is held here), and the key is claimed when a slot frees."""
    finish: dict[str, asyncio.Event] = {}
    turns: list[str] = []
    unanswered: Counter[str] = Counter()

    async def process(lease: Lease) -> Worked:
        if not unanswered[lease.queue_key]:
            return Worked.IDLE
        unanswered[lease.queue_key] = 0  # messages come together into one turn
        turns.append(lease.queue_key)
        finish[lease.queue_key] = event = asyncio.Event()
        await event.wait()
        return Worked.ANSWERED

    leases = OneLease()
    dispatcher = Dispatcher(None, process, 1, leases)  # type: ignore[arg-type]

    async def message(queue_key: str) -> None:
        unanswered[queue_key] += 1
        leases.hear(dispatcher, queue_key)

    await message("test:1|example")
    await until(lambda: turns == ["test:1|example"])
    finish["test:1|example"].set()
    await asyncio.wait_for(dispatcher.idle(), timeout=30)
    assert leases.kept("test:1|example") is not None  # kept for the next message
    await message("test:2|example")
    await until(lambda: turns[-1:] == ["test:2|example"])
    await message("test:1|example")  # its next message: the one slot is taken
    await until(lambda: bool(leases.given_back))
    assert [lease.queue_key for lease in leases.given_back] == ["test:1|example"]
    finish["test:2|example"].set()
    await until(lambda: turns[-1:] == ["test:1|example"])  # swept once the slot freed
    finish["test:1|example"].set()
    await asyncio.wait_for(dispatcher.idle(), timeout=30)
    await dispatcher.close(1)


async def until(condition: Callable[[], bool]) -> None:
    """Let the dispatcher's tasks run until ``condition()`` holds (30 s at most)."""
    async with asyncio.timeout(30):
        for _ in itertools.count():
            if condition():
                return
            await asyncio.sleep(0)
