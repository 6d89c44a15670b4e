"""Claiming a queue key to send its replies that wait for a retry (``claim_for_retry``), on
both backends: such a key has nothing pending, so the generic claim leaves it alone, but the
retry loop may lease it — only while no other live worker holds it — and every record of the
retry is fenced by that lease like a turn's. A lease given for 0 seconds has lapsed by the
next statement."""

from __future__ import annotations

import itertools

import pytest

from bot.store import DeliveryRetry, Lease, LeaseLost, NewMessage, Store

LEASE_SECONDS = 60.0
KEY = "tg:1|ava"
_dedup = itertools.count(1)


async def refused_reply(
    store: Store, holder: str = "w0", lease_seconds: float = LEASE_SECONDS
) -> tuple[int, Lease]:
    """A turn's reply on KEY that the platform refused: it waits for a retry; the turn's
    lease (held by ``holder`` for ``lease_seconds``) is returned, not released."""
    inbound = await store.add_message(
        NewMessage(
            chat_key="tg:1",
            role="user",
            text="hello",
            audience="dm",
            status="pending",
            queue_key=KEY,
            dedup_key=f"m{next(_dedup)}",
        )
    )
    assert inbound is not None
    [turn] = await store.claim_queue_keys(holder, lease_seconds, 1, KEY)
    reply = NewMessage(
        chat_key="tg:1", role="assistant", text="hi", audience="dm", status="delivering"
    )
    reply_id = await store.finish_turn([inbound], None, reply, lease=turn)
    await store.schedule_delivery_retry(DeliveryRetry(reply_id, 1, 0.0, 0.0, "502"), lease=turn)
    return reply_id, turn


async def test_a_key_whose_reply_waits_for_a_retry_is_claimed_for_it_not_by_the_sweep(
    store: Store,
) -> None:
    reply_id, turn = await refused_reply(store)
    await store.release_leases([turn])
    assert await store.claim_queue_keys("w1", LEASE_SECONDS, 10) == []
    claimed = await store.claim_for_retry("w1", LEASE_SECONDS, KEY, reply_id)
    assert claimed is not None
    assert (claimed.queue_key, claimed.worker_id) == (KEY, "w1")
    assert claimed.epoch > turn.epoch
    assert await store.lease(KEY) == claimed


async def test_a_key_another_live_worker_holds_is_not_claimed_for_a_retry(store: Store) -> None:
    reply_id, turn = await refused_reply(store)
    assert await store.claim_for_retry("w1", LEASE_SECONDS, KEY, reply_id) is None
    assert await store.lease(KEY) == turn


async def test_a_workers_own_live_lease_is_not_taken_again_for_a_retry(store: Store) -> None:
    """Its turn may be working the key right now: a new epoch would fence that turn out."""
    reply_id, turn = await refused_reply(store)
    assert await store.claim_for_retry("w0", LEASE_SECONDS, KEY, reply_id) is None
    assert await store.lease(KEY) == turn


async def test_a_lapsed_lease_is_taken_over_for_a_retry(store: Store) -> None:
    reply_id, turn = await refused_reply(store, lease_seconds=0)
    claimed = await store.claim_for_retry("w1", LEASE_SECONDS, KEY, reply_id)
    assert claimed is not None and claimed.epoch == turn.epoch + 1


async def test_a_reply_that_waits_for_no_retry_claims_nothing(store: Store) -> None:
    reply_id, turn = await refused_reply(store)
    await store.release_leases([turn])
    await store.mark_delivered(reply_id)
    assert await store.claim_for_retry("w1", LEASE_SECONDS, KEY, reply_id) is None
    assert await store.claim_for_retry("w1", LEASE_SECONDS, KEY, reply_id + 100) is None


async def test_a_reply_of_another_key_claims_nothing(store: Store) -> None:
    reply_id, turn = await refused_reply(store)
    await store.release_leases([turn])
    assert await store.claim_for_retry("w1", LEASE_SECONDS, "tg:1|bea", reply_id) is None


async def test_a_reply_outside_every_queue_lets_its_chats_key_be_claimed(store: Store) -> None:
    """A greeting or check-in has no queue key: it is sent under the key whose turns answer
    its chat and partner, which may never have had a lease row."""
    greeting = await store.add_message(
        NewMessage(
            chat_key="tg:2",
            role="assistant",
            text="welcome",
            audience="dm",
            status="delivering",
            partner_id="ava",
        )
    )
    assert greeting is not None
    await store.schedule_delivery_retry(DeliveryRetry(greeting, 1, 0.0, 0.0, "502"))
    claimed = await store.claim_for_retry("w1", LEASE_SECONDS, "tg:2|ava", greeting)
    assert claimed is not None and claimed.queue_key == "tg:2|ava"


async def test_a_retrys_records_are_refused_once_its_lease_was_taken_over(store: Store) -> None:
    reply_id, turn = await refused_reply(store)
    await store.release_leases([turn])
    stale = await store.claim_for_retry("w1", 0, KEY, reply_id)
    current = await store.claim_for_retry("w2", LEASE_SECONDS, KEY, reply_id)
    assert stale is not None and current is not None and current.epoch > stale.epoch
    retry = DeliveryRetry(reply_id, 2, 0.0, 10.0, "502")
    with pytest.raises(LeaseLost):
        await store.record_chunk(reply_id, 0, "p1", lease=stale)
    with pytest.raises(LeaseLost):
        await store.record_last_chunk(reply_id, 0, "p1", lease=stale)
    with pytest.raises(LeaseLost):
        await store.schedule_delivery_retry(retry, lease=stale)
    with pytest.raises(LeaseLost):
        await store.mark_failed(reply_id, lease=stale)
    assert await store.delivered_chunks(reply_id) == 0
    await store.record_last_chunk(reply_id, 0, "p1", lease=current)
    assert await store.delivered_chunks(reply_id) == 1
    message = await store.message(reply_id)
    assert message is not None and message.status == "delivered"
