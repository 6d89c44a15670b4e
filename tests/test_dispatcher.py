"""The dispatcher's own promises, apart from any store: a queue key whose turn raised before
it could even be counted (the database went away mid-turn) is worked again by itself, without
waiting for a new message or a restart (docs/architecture.md "Nothing stays pending forever")."""

from __future__ import annotations

import asyncio

from bot.store import Lease
from bot.workers.dispatcher import Dispatcher, Worked

KEY = "test:1|example"


class OneLease:
    """The worker's side of leases, for one key that nobody else wants."""

    def __init__(self) -> None:
        self.released: list[Lease] = []

    async def claim(self, queue_key: str) -> Lease | None:
        return Lease(queue_key, "w1", 1, 0.0)

    async def release(self, lease: Lease) -> None:
        self.released.append(lease)

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
    dispatcher.notify(KEY)
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
    dispatcher.notify("test:1|example")
    await asyncio.wait_for(first_running.wait(), timeout=30)
    dispatcher.notify("test:2|example")
    for _ in range(20):  # give the second key's task every chance to claim
        await asyncio.sleep(0)
    claimed_while_busy = list(claims.claimed)
    finish_first.set()
    await asyncio.wait_for(dispatcher.idle(), timeout=30)
    assert claimed_while_busy == ["test:1|example"]
    assert worked == ["test:1|example", "test:2|example"]
    await dispatcher.close(1)
