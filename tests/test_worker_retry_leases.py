"""The lease a worker gives a reply that waits for a retry (:meth:`Worker.retry_lease`), on
both backends: the worker's own lease on the key when it holds one (used as it is, so its
turn is not fenced out), else one claimed for the retry and kept idle afterwards like a
turn's, which the heartbeat gives back; none while another worker holds the key. And what a
turn does with a waiting reply of another key of its chat (two partners in one chat)."""

from __future__ import annotations

import itertools

import pytest

from bot.config.deployment import DeliveryConfig, WorkersConfig
from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.store import LeaseLost, NewMessage, Store
from bot.workers.worker import Worker
from tests.conftest import RecordingChannel
from tests.test_store_retry_claims import KEY, refused_reply

SETTINGS = WorkersConfig(lease_seconds=600, heartbeat_seconds=200)
_dedup = itertools.count(1)


class Clock:
    """A worker's monotonic clock that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def started(store: Store, name: str, clock: Clock | None = None) -> Worker:
    worker = Worker(store, SETTINGS.model_copy(update={"id": name}), clock or Clock())
    await store.register_worker(worker.id, "host", 1)
    return worker


async def test_a_worker_holding_the_key_sends_the_retry_under_that_lease(store: Store) -> None:
    worker = await started(store, "one")
    _, turn = await refused_reply(store, "someone", 600)
    await store.release_leases([turn])
    await store.add_message(
        NewMessage("tg:1", "user", "again", "dm", "pending", f"again-{next(_dedup)}", KEY)
    )
    held = await worker.claim(KEY)  # this worker's turn holds the key now
    assert held is not None
    [waiting] = await store.waiting_replies("tg:1")
    async with worker.retry_lease(KEY, waiting.message_id) as lease:
        assert lease == held
    assert await store.lease(KEY) == held  # no new epoch: the turn is not fenced out
    assert worker.held == 1


async def test_a_lease_claimed_for_a_retry_is_kept_idle_then_given_back(store: Store) -> None:
    clock = Clock()
    worker = await started(store, "one", clock)
    reply_id, turn = await refused_reply(store, "turn", 600)
    await store.release_leases([turn])
    async with worker.retry_lease(KEY, reply_id) as lease:
        assert lease is not None and lease.worker_id == "one" and lease.epoch > turn.epoch
        await worker.ensure(lease)  # held: each chunk may go out under it
    assert await store.lease(KEY) == lease  # kept a while, as after a turn
    clock.now += SETTINGS.heartbeat_seconds
    await worker.beat()
    gone = await store.lease(KEY)
    assert gone is not None and gone.worker_id == "" and worker.held == 0


async def test_no_retry_lease_while_another_worker_holds_the_key(store: Store) -> None:
    worker = await started(store, "one")
    reply_id, turn = await refused_reply(store, "two", 600)
    async with worker.retry_lease(KEY, reply_id) as lease:
        assert lease is None
    assert await store.lease(KEY) == turn and worker.held == 0


# ---- a turn meets a waiting reply of another key of its chat ---------------------------------


async def test_a_turn_sends_its_chats_waiting_reply_of_another_key_under_that_keys_lease(
    store: Store,
) -> None:
    """Two partners answer in one chat: Bea's turn finds Ava's refused reply waiting and
    sends it first, under Ava's key taken for the retry — unless another worker holds that
    key, whose next turn of Ava sends it; Bea's own reply goes out either way."""
    await store.upsert_chat("tg:1", "test", "1", None, "dm", None)
    worker = await started(store, "one")
    channel = RecordingChannel()

    async def tell_owner(platform: str, text: str) -> None:
        raise AssertionError(f"the owner was told on {platform}: {text}")

    delivery = Delivery(
        store,
        {"test": channel},
        lambda _partner: None,
        DeliveryConfig(),
        tell_owner,
        ensure_lease=worker.ensure,
        retry_lease=worker.retry_lease,
    )
    _, ava = await refused_reply(store, "two", 600)  # Ava's key: another live worker holds it

    async def bea_answers(text: str) -> None:
        await store.add_message(
            NewMessage("tg:1", "user", text, "dm", "pending", f"again-{next(_dedup)}", "tg:1|bea")
        )
        lease = await worker.claim("tg:1|bea")
        assert lease is not None
        [inbound] = await store.pending("tg:1|bea")
        reply = NewMessage("tg:1", "assistant", f"bea: {text}", "dm", "delivering")
        reply_id = await store.finish_turn([inbound.id], None, reply, lease=lease)
        chat = await store.chat("tg:1")
        assert chat is not None
        pending = PendingReply(reply_id, chat, reply.text, None, None, lease=lease)
        assert await delivery.send(pending)
        await worker.release(lease)

    await bea_answers("first")
    assert channel.texts() == ["bea: first"]  # Ava's reply is left to the worker holding it
    await store.release_leases([ava])
    await bea_answers("second")
    assert channel.texts() == ["bea: first", "hi", "bea: second"]
    assert await store.waiting_replies("tg:1") == []


# ---- a lease the heartbeat saw taken ---------------------------------------------------------


async def test_a_worker_sends_nothing_more_once_its_heartbeat_saw_its_lease_taken(
    store: Store,
) -> None:
    # a worker paused past its lease (a VM freeze) comes back: the heartbeat learns another
    # worker took the chat, and from then on every chunk of its old turn is refused
    one, two = await started(store, "one"), await started(store, "two")
    await store.add_message(
        NewMessage("tg:1", "user", "hi", "dm", "pending", f"hi-{next(_dedup)}", KEY)
    )
    lease = await one.claim(KEY)
    assert lease is not None
    await one.ensure(lease)  # still its own
    await store.release_leases([lease])  # as if it ran out while the worker was frozen
    taken = await two.claim(KEY)
    assert taken is not None and taken.epoch > lease.epoch
    await one.beat()
    with pytest.raises(LeaseLost):
        await one.ensure(lease)
    assert one.held == 0
