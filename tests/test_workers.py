"""Several workers on one database (bot/workers/worker.py, bot/workers/dispatcher.py): two workers
in this process share one store (SQLite, and PostgreSQL, where NOTIFY wakes them too), each with its
own dispatcher and the real delivery, and work its chats under leases. A lease of 2 seconds
(the shortest allowed) lets a test see one lapse; every wait is for a condition, with a
timeout."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from bot.config.deployment import DeliveryConfig, WorkersConfig
from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.store import Leader, Lease, LeaseLost, NewMessage, Store, StoreError
from bot.store.opening import open_store
from bot.workers.dispatcher import Dispatcher, Worked
from bot.workers.worker import Worker
from tests.conftest import RecordingChannel
from tests.liveness_support import drop_liveness_connection, until_liveness_holder
from tests.postgres_server import PostgresServer

SHORT = WorkersConfig(lease_seconds=2, heartbeat_seconds=0.5)
QUIET = WorkersConfig(lease_seconds=600, heartbeat_seconds=200)
"""No heartbeat (so no sweep) within a test: only what the test does, or a wake-up, moves."""
WAIT_SECONDS = 15.0


async def until(condition: Callable[[], object], what: str) -> None:
    """Poll state that has no event of its own (a worker's leadership, a dispatcher's tasks)
    until it holds, or fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while True:
        if condition():
            return
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {WAIT_SECONDS:g}s waiting for {what}")
        await asyncio.sleep(0.01)


@dataclass
class Duties:
    """Leader services that only record when they start and stop."""

    led: list[int] = field(default_factory=list)
    followed: int = 0
    failing: str | None = None
    """What keeps these duties from their work (None: they work)."""

    async def lead(self, leader: Leader) -> None:
        self.led.append(leader.epoch)

    async def follow(self) -> None:
        self.followed += 1

    def trouble(self) -> str | None:
        return self.failing


@dataclass
class Turns:
    """The turn a worker's dispatcher runs: what TurnRunner does without the model — finish
    the key's replies whose delivery was cut off, then close the pending messages with one
    recorded reply and deliver it, all under the lease. A turn waits at ``hold`` (when set)
    after recording its reply: a worker paused mid-turn."""

    store: Store
    delivery: Delivery
    worker: str
    hold: asyncio.Event | None = None
    answered: list[tuple[str, str]] = field(default_factory=list)
    running: set[str] = field(default_factory=set)
    overlaps: int = 0

    async def process(self, lease: Lease) -> Worked:
        context = await self.store.turn_context(lease.queue_key, 0)
        try:
            if context.unfinished and await self.delivery.finish(context.unfinished, lease):
                return Worked.DELIVERED
        except LeaseLost:
            return Worked.LOST
        pending = context.pending
        if not pending:
            return Worked.IDLE
        chat_key = pending[-1].chat_key
        if chat_key in self.running:
            self.overlaps += 1
        self.running.add(chat_key)
        try:
            reply = NewMessage(chat_key, "assistant", f"re {pending[-1].text}", "dm", "delivering")
            reply_id = await self.store.finish_turn(
                [row.id for row in pending], None, reply, lease=lease
            )
            if self.hold is not None:
                await self.hold.wait()
            chat = await self.store.chat(chat_key)
            assert chat is not None
            await self.delivery.send(
                PendingReply(reply_id, chat, reply.text, None, None, lease=lease)
            )
        except LeaseLost:
            return Worked.LOST
        finally:
            self.running.discard(chat_key)
        self.answered.append((self.worker, chat_key))
        return Worked.ANSWERED


@dataclass
class Node:
    """One worker with its dispatcher, delivery and leader duties."""

    worker: Worker
    dispatcher: Dispatcher
    turns: Turns
    duties: Duties


class Cluster:
    def __init__(
        self,
        store: Store,
        channel: RecordingChannel,
        server: PostgresServer | None = None,
        url: str | None = None,
    ) -> None:
        self.store = store
        self.channel = channel
        self.server = server
        self.url = url
        """The PostgreSQL server and database's URL (None on SQLite)."""
        self.nodes: list[Node] = []

    def node(self, name: str, settings: WorkersConfig = SHORT) -> Node:
        worker = Worker(self.store, settings.model_copy(update={"id": name}))

        async def tell_owner(platform: str, text: str) -> None:
            raise AssertionError(f"the owner was told on {platform}: {text}")

        delivery = Delivery(
            self.store,
            {"test": self.channel},
            lambda _partner: None,
            DeliveryConfig(),
            tell_owner,
            ensure_lease=worker.ensure,
            retry_lease=worker.retry_lease,
        )
        turns = Turns(self.store, delivery, name)
        node = Node(worker, Dispatcher(self.store, turns.process, 8, worker), turns, Duties())
        self.nodes.append(node)
        return node

    async def start(self, node: Node) -> Node:
        await node.worker.start(node.dispatcher, node.duties)
        return node

    async def stop(self, node: Node) -> None:
        await node.dispatcher.close(5)
        await node.worker.stop()
        self.nodes.remove(node)

    async def message(self, chat: int, text: str) -> None:
        chat_key = f"test:{chat}"
        await self.store.upsert_chat(chat_key, "test", str(chat), None, "dm", None)
        await self.store.add_message(
            NewMessage(
                chat_key,
                "user",
                text,
                "dm",
                "pending",
                dedup_key=f"{chat_key}/{text}",
                queue_key=f"{chat_key}|ava",
            )
        )


@pytest.fixture(params=("sqlite", "postgres"))
async def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Cluster]:
    server: PostgresServer | None = None
    location: Path | str = tmp_path / "db.sqlite"
    database = ""
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        database = await server.create_database()
        location = server.url(database)
    store = await open_store(location)
    url = str(location) if server is not None else None
    cluster = Cluster(store, RecordingChannel(), server, url)
    yield cluster
    for node in list(cluster.nodes):
        await cluster.stop(node)
    await store.close()
    if server is not None:
        await server.drop_database(database)


async def test_two_workers_answer_every_chat_once_and_never_one_chat_at_once(
    cluster: Cluster,
) -> None:
    chats = range(30)
    for chat in chats:
        await cluster.message(chat, "hello")
        await cluster.message(chat, "again")
    one = cluster.node("one")
    two = cluster.node("two")
    # both start, then sweep: neither's first sweep may take every chat
    await asyncio.gather(cluster.start(one), cluster.start(two))
    await until(
        lambda: len(one.turns.answered) + len(two.turns.answered) >= len(chats),
        "every chat answered",
    )
    await one.dispatcher.idle()
    await two.dispatcher.idle()
    answered = [chat for _, chat in one.turns.answered + two.turns.answered]
    assert sorted(answered) == sorted(f"test:{chat}" for chat in chats)  # once each
    assert len(cluster.channel.sent) == len(chats)
    assert one.turns.overlaps == two.turns.overlaps == 0
    assert await cluster.store.pending_count() == 0


async def test_a_message_for_a_chat_another_worker_holds_is_left_to_that_worker(
    cluster: Cluster,
) -> None:
    one = await cluster.start(cluster.node("one"))
    two = await cluster.start(cluster.node("two"))
    hold = asyncio.Event()
    one.turns.hold = two.turns.hold = hold
    await cluster.message(1, "first")
    one.dispatcher.notify("test:1|ava")
    # PostgreSQL wakes both workers: whichever claimed the chat holds it
    await until(
        lambda: "test:1" in one.turns.running or "test:1" in two.turns.running,
        "the first turn running",
    )
    holder, other = (one, two) if "test:1" in one.turns.running else (two, one)
    await cluster.message(1, "second")
    other.dispatcher.notify("test:1|ava")  # the other stored it; the holder has the chat
    await until(lambda: other.dispatcher.active == 0, "the other leaving the chat alone")
    holder.dispatcher.notify("test:1|ava")  # what PostgreSQL's NOTIFY tells the holder
    hold.set()
    await until(lambda: len(holder.turns.answered) == 2, "the holder answering both")
    assert cluster.channel.texts() == ["re first", "re second"]  # in order
    assert other.turns.answered == []


async def test_a_worker_paused_past_its_lease_never_delivers_after_another_took_over(
    cluster: Cluster,
) -> None:
    # "one" never beats (a process stopped by SIGSTOP keeps nothing renewed)
    one = cluster.node("one")
    hold = asyncio.Event()
    one.turns.hold = hold
    await cluster.message(1, "hello")
    one.dispatcher.notify("test:1|ava")
    await until(lambda: "test:1" in one.turns.running, "one paused after recording its reply")
    stale = await cluster.store.lease("test:1|ava")
    assert stale is not None and stale.worker_id == "one"
    two = await cluster.start(cluster.node("two"))
    await cluster.message(1, "are you there?")  # a new message: the chat has work again
    await until(lambda: len(two.turns.answered) == 1, "two answering after the lease lapsed")
    hold.set()  # one wakes up
    await one.dispatcher.idle()
    assert one.turns.answered == []
    # the reply one recorded before its pause is two's to deliver now, once, and first
    assert cluster.channel.texts() == ["re hello", "re are you there?"]
    taken = await cluster.store.lease("test:1|ava")
    assert taken is not None and taken.epoch > stale.epoch


async def test_a_reply_a_paused_worker_recorded_is_delivered_once_by_the_worker_that_took_over(
    cluster: Cluster,
) -> None:
    # nothing is pending after one recorded its reply: only that reply makes the chat work
    one = cluster.node("one")  # never beats, like a process stopped by SIGSTOP
    hold = asyncio.Event()
    one.turns.hold = hold
    await cluster.message(1, "hello")
    one.dispatcher.notify("test:1|ava")
    await until(lambda: "test:1" in one.turns.running, "one paused after recording its reply")
    two = await cluster.start(cluster.node("two"))
    await until(lambda: cluster.channel.texts() == ["re hello"], "two delivering one's reply")
    hold.set()  # one wakes up with the reply in hand
    await one.dispatcher.idle()
    await two.dispatcher.idle()
    assert cluster.channel.texts() == ["re hello"]
    assert one.turns.answered == [] and two.turns.answered == []


async def test_one_worker_leads_and_another_takes_over_when_it_stops(cluster: Cluster) -> None:
    one = await cluster.start(cluster.node("one"))
    two = await cluster.start(cluster.node("two"))
    assert one.duties.led == [1] and two.duties.led == []
    await cluster.stop(one)
    assert one.duties.followed == 1
    await until(lambda: two.duties.led, "two leading")
    assert two.duties.led == [2]
    assert two.worker.leader is not None and two.worker.leader.epoch == 2


@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
async def test_a_leader_whose_duties_keep_failing_gives_the_leadership_to_another_worker(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    one = await cluster.start(cluster.node("one"))
    two = await cluster.start(cluster.node("two"))
    assert one.duties.led == [1] and two.duties.led == []
    caplog.set_level(logging.WARNING, logger="bot.workers.worker")
    one.duties.failing = "telegram has failed for 60 s (Bad Gateway)"
    await until(lambda: two.duties.led, "two leading")
    assert one.duties.followed == 1 and one.worker.leader is None
    assert two.duties.led == [2]
    assert _logged(caplog, "worker one gives the leadership up: telegram has failed") == 1


async def test_a_lone_leader_keeps_the_leadership_though_its_duties_fail(cluster: Cluster) -> None:
    """Nobody else could do better: giving up would only stop the leader's other duties."""
    one = await cluster.start(cluster.node("one", QUIET))
    one.duties.failing = "telegram has failed for 60 s (Bad Gateway)"
    for _ in range(3):
        await one.worker.beat()
    assert one.duties.led == [1] and one.duties.followed == 0
    assert one.worker.leader is not None


async def test_a_worker_frees_at_once_what_a_dead_worker_on_its_host_held(
    cluster: Cluster,
) -> None:
    gone = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import os; print(os.getpid())", stdout=asyncio.subprocess.PIPE
    )
    output, _ = await gone.communicate()
    dead_pid = int(output)
    store = cluster.store
    await store.register_worker("dead", socket.gethostname(), dead_pid)
    await cluster.message(1, "hello")
    await store.claim_queue_keys("dead", 3600, 10)
    await store.lead("dead", 3600)
    # an hour-long lease: only knowing its holder is dead lets another worker in now
    new = await cluster.start(cluster.node("new"))
    assert new.duties.led == [2]
    await cluster.channel.wait_sent(1)
    assert [w.worker_id for w in await store.workers()] == ["new"]


@pytest.mark.parametrize("cluster", ["sqlite"], indirect=True)
async def test_a_lease_under_the_workers_id_that_it_does_not_know_is_given_back_and_worked(
    cluster: Cluster,
) -> None:
    """A sweep's claim that committed but whose answer never reached the worker (a timeout,
    a lost connection) leaves a lease under its id that no task of it works on: the next
    heartbeat gives it back instead of renewing it for nobody, and the sweep after it takes
    the chat under a new epoch. (On SQLite, where nothing but the worker's own sweep finds
    a message stored beside it; PostgreSQL's wake-up would have it claim the key itself.)"""
    one = await cluster.start(cluster.node("one", QUIET))
    await cluster.message(1, "hello")
    [unknown] = await cluster.store.claim_queue_keys("one", 600, 10)
    await one.worker.beat()
    await until(lambda: one.turns.answered, "the chat answered")
    taken = await cluster.store.lease("test:1|ava")
    assert taken is not None and taken.epoch > unknown.epoch


@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
async def test_a_worker_hears_other_workers_messages_again_after_its_connection_was_cut(
    cluster: Cluster,
) -> None:
    """The connection that listens for other workers' messages (and holds the worker's
    liveness lock) is ended by the server; the worker takes a new one at once, not at its
    next heartbeat, which in this test is minutes away: so only the wake-up can answer."""
    one = await cluster.start(cluster.node("one", QUIET))
    assert cluster.url is not None
    watcher = await asyncpg.connect(cluster.url)
    try:
        cut = await drop_liveness_connection(watcher, "one")
        await until_liveness_holder(
            watcher, "one", lambda holder: holder not in (None, cut), "a new liveness lock"
        )
    finally:
        await watcher.close()
    await cluster.message(1, "hello")  # stored beside the worker, as another worker would
    await until(lambda: one.turns.answered, "the worker woken by the message")
    assert cluster.channel.texts() == ["re hello"]


@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
async def test_a_worker_says_once_that_its_liveness_was_lost_and_takes_it_again_by_itself(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL stops for a while (many heartbeats fail meanwhile) and comes back: the loss
    of the liveness connection is logged once, not on every beat, and the worker locks again
    without being told to."""
    server = cluster.server
    assert server is not None and cluster.url is not None
    await cluster.start(cluster.node("one"))
    caplog.set_level(logging.DEBUG, logger="bot.workers.worker")  # a failed beat after the first
    await asyncio.to_thread(server.stop_serving)
    try:
        await until(lambda: _logged(caplog, "heartbeat failed") >= 3, "three failed heartbeats")
    finally:
        await asyncio.to_thread(server.start_serving)
    watcher = await asyncpg.connect(cluster.url)
    try:
        await until_liveness_holder(
            watcher, "one", lambda holder: holder is not None, "the lock taken again"
        )
    finally:
        await watcher.close()
    assert _logged(caplog, "lost its liveness connection") == 1


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("cluster", ["postgres"], indirect=True)
async def test_a_second_worker_under_a_live_workers_id_refuses_to_start(cluster: Cluster) -> None:
    """Two workers under one ``[workers] id`` (a fixed id in a config every replica shares)
    would take each other's chats and leadership as their own: the second is refused with
    what to do, before it touches anything; once the first is gone the id is free again."""
    first = await cluster.start(cluster.node("same"))
    second = cluster.node("same")
    with pytest.raises(StoreError, match=r"already runs under the id 'same'.*\[workers\] id"):
        await second.worker.check_id()
    [row] = await cluster.store.workers()
    assert row.alive is True and first.worker.leader is not None  # the first one untouched
    await cluster.stop(first)
    await cluster.node("same").worker.check_id()


async def test_the_registry_tells_a_live_worker_from_one_that_holds_no_lock(
    cluster: Cluster,
) -> None:
    await cluster.start(cluster.node("one"))
    await cluster.store.register_worker("silent", "elsewhere", 1)  # never took its lock
    listed = {w.worker_id: w.alive for w in await cluster.store.workers()}
    if cluster.server is None:  # SQLite has one worker and cannot tell
        assert listed == {"one": None, "silent": None}
    else:
        assert listed == {"one": True, "silent": False}


async def test_a_chat_its_own_sweep_claims_while_its_task_claims_it_is_worked_under_one_lease(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone worker: a message arrives as the heartbeat's sweep runs, so the sweep claims the
    chat for the task the message started, which is claiming it too. Every turn runs under
    the lease the worker holds; none is refused as taken over (each refused turn logged
    "taken over by another worker" with no other worker there)."""
    node = await cluster.start(cluster.node("one", QUIET))
    key = "test:1|ava"
    swept = asyncio.Event()
    claim = node.worker.claim

    async def claim_after_the_sweep(queue_key: str) -> Lease | None:
        await swept.wait()
        return await claim(queue_key)

    leases: list[Lease] = []
    process = node.turns.process

    async def typed_quickly(lease: Lease) -> Worked:
        leases.append(lease)
        if len(node.turns.answered) == 1 and len(leases) == 2:
            await cluster.message(1, "second")  # typed as soon as the first reply showed
            node.dispatcher.notify(key)
        return await process(lease)

    node.worker.claim = claim_after_the_sweep  # type: ignore[method-assign]
    node.dispatcher._process = typed_quickly
    await cluster.message(1, "first")
    node.dispatcher.notify(key)  # the key's task starts and claims the key...
    assert await node.worker.sweep() == 1  # ...as the heartbeat's sweep claims it too
    swept.set()
    await until(lambda: len(node.turns.answered) == 2, "both messages answered")
    await node.dispatcher.idle()
    held = await cluster.store.lease(key)
    assert held is not None
    assert {lease.epoch for lease in leases} == {held.epoch}
    assert not [r for r in caplog.records if "taken over" in r.getMessage()]
    assert cluster.channel.texts() == ["re first", "re second"]
