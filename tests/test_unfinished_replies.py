"""A reply recorded but not delivered belongs to its chat's queue (docs/architecture.md "Nothing
stays
pending forever"; docs/delivery.md): when an outage, a lost lease or a dead worker
cuts its delivery off, its queue key stays claimable by any worker's sweep, and whoever works
the key next finishes the reply under the key's lease — chunks already recorded not sent again
— before it answers anything newer. Nothing waits for a leader change or a restart.

The store's half runs on both backends; the gateway's half runs a whole gateway on each. An
outage is the store raising :class:`StoreUnavailable` from one method for a moment, as the
backends do when the database goes away."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from bot.store import DeliveryRetry, Lease, NewMessage, Store, StoreUnavailable
from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Reply

KEY = "tg:1|ava"
LEASE_SECONDS = 60.0
WAIT_SECONDS = 15.0
_dedup = itertools.count(1)


# ---- the store: which keys are claimable, what a turn reads ---------------------------------


def _pending(queue_key: str = KEY) -> NewMessage:
    return NewMessage(
        chat_key=queue_key.split("|")[0],
        role="user",
        text="hello",
        audience="dm",
        status="pending",
        dedup_key=f"m{next(_dedup)}",
        queue_key=queue_key,
    )


def _reply(text: str = "hi") -> NewMessage:
    return NewMessage(
        chat_key="tg:1", role="assistant", text=text, audience="dm", status="delivering"
    )


async def _recorded_reply(store: Store, text: str = "hi") -> tuple[int, Lease]:
    """A turn of KEY under w1's lease recorded its reply and stopped before delivering it;
    its lease was given back (or lapsed)."""
    message_id = await store.add_message(_pending())
    assert message_id is not None
    [lease] = await store.claim_queue_keys("w1", LEASE_SECONDS, 10, KEY)
    reply_id = await store.finish_turn([message_id], None, _reply(text), lease=lease)
    await store.release_leases([lease])
    return reply_id, lease


async def test_a_key_with_only_an_unfinished_reply_is_claimed_by_a_sweep(store: Store) -> None:
    _, before = await _recorded_reply(store)
    assert await store.pending(KEY) == []
    [lease] = await store.claim_queue_keys("w2", LEASE_SECONDS, 10)
    assert (lease.queue_key, lease.worker_id, lease.epoch) == (KEY, "w2", before.epoch + 1)


async def test_a_key_with_only_an_unfinished_reply_is_claimed_when_asked_for(
    store: Store,
) -> None:
    await _recorded_reply(store)
    [lease] = await store.claim_queue_keys("w2", LEASE_SECONDS, 1, KEY)
    assert lease.queue_key == KEY


async def test_a_delivered_reply_or_one_waiting_for_its_retry_leaves_the_key_alone(
    store: Store,
) -> None:
    reply_id, _ = await _recorded_reply(store)
    await store.schedule_delivery_retry(DeliveryRetry(reply_id, 1, 0.0, 1e12, "503"))
    assert await store.claim_queue_keys("w2", LEASE_SECONDS, 10) == []  # the retry loop's
    await store.record_last_chunk(reply_id, 0, "out-1")
    assert await store.claim_queue_keys("w2", LEASE_SECONDS, 10) == []


async def test_the_turn_reads_its_keys_unfinished_replies_oldest_first(store: Store) -> None:
    first, _ = await _recorded_reply(store, "one")
    second, _ = await _recorded_reply(store, "two")
    await store.add_message(_pending())
    context = await store.turn_context(KEY, 20)
    assert context.unfinished == [first, second]
    assert len(context.pending) == 1
    await store.record_last_chunk(first, 0, "out-1")
    assert (await store.turn_context(KEY, 20)).unfinished == [second]
    assert (await store.turn_context("tg:2|ava", 20)).unfinished == []


async def test_a_turns_reply_is_not_left_to_the_leaders_recovery(store: Store) -> None:
    """The leader's pass at the start of a leadership sends without a lease: a reply of a
    queue is its key holder's, or two workers could send it at once."""
    await _recorded_reply(store)
    assert await store.interrupted_deliveries() == []


# ---- the gateway: the key's next worker finishes the reply -----------------------------------


def outage(
    store: Store, method: str, times: int, before: Callable[[], Awaitable[None]] | None = None
) -> list[str]:
    """Make ``store.<method>`` raise StoreUnavailable on its next ``times`` calls (after
    running ``before``), as a backend does while its database is away; the calls it refused."""
    real = getattr(store, method)
    refused: list[str] = []

    async def away(*args: Any, **kwargs: Any) -> Any:
        if len(refused) < times:
            refused.append(method)
            if before is not None:
                await before()
            raise StoreUnavailable(f"{method}: the database went away")
        return await real(*args, **kwargs)

    setattr(store, method, away)
    return refused


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll the store for a state no event announces, or fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not await condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {WAIT_SECONDS:g}s waiting for {what}")
        await asyncio.sleep(0.02)


def delivered(harness: Harness) -> Callable[[], Awaitable[bool]]:
    """Whether the reply that became the channel's first message is recorded as delivered."""

    async def check() -> bool:
        reply = await harness.app.store.reply_for_platform_message("test:42", "out-1")
        return reply is not None and reply.status == "delivered"

    return check


async def test_a_reply_whose_delivery_met_a_store_outage_is_finished_by_the_dispatchers_retry(
    harness_on_each_backend: Harness,
) -> None:
    harness = harness_on_each_backend
    store = harness.app.store
    # the outage starts after the reply was recorded and lasts long enough that the turn's
    # failure cannot even be counted: the dispatcher works the key again after a pause
    refused = [outage(store, "waiting_replies", 1), outage(store, "count_failed_turn", 1)]
    harness.llm.script(Reply(text="recorded before the outage"))
    await harness.send(dm(42, "hello?"))
    sent = await harness.channel.wait_sent(1, timeout=WAIT_SECONDS)
    assert refused == [["waiting_replies"], ["count_failed_turn"]]
    assert [m.text for m in sent] == ["recorded before the outage"]
    await until(delivered(harness), "the reply recorded as delivered")
    await harness.settle()
    assert harness.channel.texts() == ["recorded before the outage"]
    assert len(harness.llm.requests) == 1


async def test_an_unfinished_reply_goes_out_once_and_before_the_next_turns_reply(
    harness_on_each_backend: Harness,
) -> None:
    harness = harness_on_each_backend
    second_stored = asyncio.Event()

    async def answer(request: dict[str, Any]) -> Reply:
        del request
        if len(harness.llm.requests) == 1:
            await second_stored.wait()  # the next message waits while the first is answered
            return Reply(text="first answer")
        return Reply(text="second answer")

    harness.llm.responder = answer
    outage(harness.app.store, "waiting_replies", 1)
    await harness.send(dm(42, "first"))
    await harness.llm.wait_for_requests(1)
    await harness.send(dm(42, "second"))
    second_stored.set()
    await harness.channel.wait_sent(2, timeout=WAIT_SECONDS)
    await harness.settle()
    assert harness.channel.texts() == ["first answer", "second answer"]
    assert len(harness.llm.requests) == 2


async def test_a_chunk_the_platform_took_is_not_sent_again_when_its_record_meets_an_outage(
    harness_on_each_backend: Harness,
) -> None:
    harness = harness_on_each_backend
    refused = outage(harness.app.store, "record_last_chunk", 2)
    harness.llm.script(Reply(text="sent once"))
    await harness.send(dm(42, "hello?"))
    await harness.channel.wait_sent(1, timeout=WAIT_SECONDS)
    await until(delivered(harness), "the chunk's record")
    await harness.settle()
    assert refused == ["record_last_chunk", "record_last_chunk"]
    assert harness.channel.texts() == ["sent once"]
