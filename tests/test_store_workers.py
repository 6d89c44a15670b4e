"""The store's workers concern on both backends (bot/store/workers.py and its PostgreSQL twin):
leases on queue keys with fencing epochs, the elected leader, job runs fenced by the leader's
epoch, and the worker registry. A lease or leadership given for 0 seconds has lapsed by the
next statement, which is how these tests make one expire without waiting."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import asyncpg
import pytest

from bot.store import (
    DeliveryRetry,
    Lease,
    LeaseLost,
    NewMedia,
    NewMessage,
    NewUsage,
    Store,
    StoreUnavailable,
)
from bot.store.leases import Liveness
from bot.store.opening import open_store
from bot.store.postgres.connection import create_pool
from bot.store.postgres.messages import PostgresMessages
from bot.store.postgres.migrations import migrate
from bot.store.postgres.search import SearchIndex as PostgresSearchIndex
from bot.store.postgres.workers import PostgresWorkers
from tests.liveness_support import drop_liveness_connection, liveness_holder
from tests.postgres_server import PostgresServer

LEASE_SECONDS = 60.0
WAIT_SECONDS = 15.0
_dedup = itertools.count(1)


class PostgresMessagesAlone(PostgresMessages, PostgresSearchIndex):
    """The messages concern of PostgreSQL on its own (with the search index it writes)."""


class SqliteSide:
    """The whole SQLite store, with pending messages stored through its own interface."""

    def __init__(self, store: Store) -> None:
        self.workers = store

    async def add_pending(self, queue_key: str) -> None:
        await self.workers.add_message(_pending(queue_key))


class PostgresSide:
    """The PostgreSQL workers concern, with pending messages stored by the messages concern
    (which also wakes the listening workers)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.workers = PostgresWorkers(pool)
        self._messages = PostgresMessagesAlone(pool)

    async def add_pending(self, queue_key: str) -> None:
        await self._messages.add_message(_pending(queue_key))


Side = SqliteSide | PostgresSide


def _pending(queue_key: str) -> NewMessage:
    return NewMessage(
        chat_key=queue_key.split("|")[0],
        role="user",
        text="hello",
        audience="dm",
        status="pending",
        dedup_key=f"m{next(_dedup)}",
        queue_key=queue_key,
    )


async def _no_recompute(method: str) -> None:
    raise AssertionError(f"an empty database recomputes nothing, but {method} was called")


@pytest.fixture(params=("sqlite", "postgres"))
async def side(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Side]:
    if request.param == "sqlite":
        store = await open_store(tmp_path / "db.sqlite")
        yield SqliteSide(store)
        await store.close()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    database = await server.create_database()
    pool = await create_pool(server.url(database))
    async with pool.acquire() as db:
        await migrate(db, _no_recompute)
    yield PostgresSide(pool)
    await pool.close()
    await server.drop_database(database)


# ---- leases ---------------------------------------------------------------------------------


async def test_a_pending_key_is_leased_to_one_worker_at_a_time(side: Side) -> None:
    await side.add_pending("tg:1|ava")
    [lease] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    assert (lease.queue_key, lease.worker_id, lease.epoch) == ("tg:1|ava", "w1", 1)
    assert await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10) == []
    assert await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10, "tg:1|ava") == []


async def test_a_worker_may_take_its_own_live_lease_again_under_a_new_epoch(side: Side) -> None:
    await side.add_pending("tg:1|ava")
    [first] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    assert await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10) == []  # a sweep
    [again] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10, "tg:1|ava")
    assert again.epoch == first.epoch + 1
    await side.workers.release_leases([first])  # the older epoch's release changes nothing
    assert await side.workers.lease("tg:1|ava") == again


async def test_only_keys_with_pending_messages_are_claimed(side: Side) -> None:
    assert await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10) == []
    await side.add_pending("tg:1|ava")
    await side.add_pending("tg:2|ava")
    leases = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10, "tg:2|ava")
    assert [lease.queue_key for lease in leases] == ["tg:2|ava"]
    assert len(await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 1)) == 1


async def test_keys_are_claimed_longest_waiting_first(side: Side) -> None:
    """A worker with room for fewer keys than wait takes those whose oldest pending message
    is oldest: a busy worker's sweep must not serve the same few chats (the lowest keys)
    over and over while the others' first messages wait for ever."""
    for key in ("tg:9|ava", "tg:5|ava", "tg:1|ava"):
        await side.add_pending(key)
    await side.add_pending("tg:9|ava")  # a newer message does not move its key back
    first = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 2)
    assert {lease.queue_key for lease in first} == {"tg:9|ava", "tg:5|ava"}


async def test_an_expired_lease_is_taken_over_with_a_new_epoch(side: Side) -> None:
    await side.add_pending("tg:1|ava")
    [old] = await side.workers.claim_queue_keys("w1", 0, 10)
    [new] = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
    assert (new.worker_id, new.epoch) == ("w2", old.epoch + 1)
    with pytest.raises(LeaseLost):
        await side.workers.renew_lease(old, LEASE_SECONDS)
    assert await side.workers.heartbeat("w1", LEASE_SECONDS, [old]) == []
    assert [lease.epoch for lease in await side.workers.heartbeat("w2", LEASE_SECONDS, [new])] == [
        2
    ]


async def test_a_released_lease_keeps_its_epoch_so_the_next_holder_has_a_higher_one(
    side: Side,
) -> None:
    await side.add_pending("tg:1|ava")
    [first] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    await side.workers.release_leases([first])
    [second] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    assert second.epoch == first.epoch + 1
    await side.workers.release_leases([first])  # a stale release leaves the new lease alone
    assert await side.workers.lease("tg:1|ava") == second


async def test_renewing_a_held_lease_extends_it_and_keeps_the_epoch(side: Side) -> None:
    await side.add_pending("tg:1|ava")
    [lease] = await side.workers.claim_queue_keys("w1", 0, 10)
    renewed = await side.workers.renew_lease(lease, LEASE_SECONDS)
    assert renewed.epoch == lease.epoch
    assert renewed.expires_at > lease.expires_at
    assert await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10) == []


async def test_the_heartbeat_renews_only_the_leases_it_names_and_lets_the_others_go(
    side: Side,
) -> None:
    """A lease row under the worker's id that it does not name (a claim whose answer it never
    got) is given back, not kept alive for nobody; one named with an older epoch is not its."""
    for key in ("tg:1|ava", "tg:2|ava", "tg:3|ava"):
        await side.add_pending(key)
    claimed = await side.workers.claim_queue_keys("w1", 0, 10)
    [known, unknown, _] = sorted(claimed, key=lambda lease: lease.queue_key)
    [again] = await side.workers.claim_queue_keys("w1", 0, 10, "tg:3|ava")
    stale = replace(again, epoch=again.epoch - 1)
    renewed = await side.workers.heartbeat("w1", LEASE_SECONDS, [known, stale])
    assert [(lease.queue_key, lease.epoch) for lease in renewed] == [("tg:1|ava", known.epoch)]
    for lost in (unknown, again):
        row = await side.workers.lease(lost.queue_key)
        assert row is not None and (row.worker_id, row.expires_at) == ("", 0)
    taken = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
    assert sorted((lease.queue_key, lease.epoch) for lease in taken) == [
        ("tg:2|ava", unknown.epoch + 1),
        ("tg:3|ava", again.epoch + 1),
    ]


async def test_two_claimers_never_get_the_same_key(side: Side) -> None:
    keys = [f"tg:{n}|ava" for n in range(40)]
    for key in keys:
        await side.add_pending(key)
    rounds = await asyncio.gather(
        *(side.workers.claim_queue_keys(f"w{n}", LEASE_SECONDS, 7) for n in range(8))
    )
    claimed = [lease.queue_key for leases in rounds for lease in leases]
    assert len(claimed) == len(set(claimed))
    # whatever a busy claimer skipped is still there for the next one
    while more := await side.workers.claim_queue_keys("w9", LEASE_SECONDS, 100):
        claimed += [lease.queue_key for lease in more]
    assert sorted(claimed) == sorted(keys)


# ---- the leader -----------------------------------------------------------------------------


async def test_the_first_worker_leads_and_renewing_keeps_its_epoch(side: Side) -> None:
    first = await side.workers.lead("w1", LEASE_SECONDS)
    assert (first.worker_id, first.epoch) == ("w1", 1)
    again = await side.workers.lead("w1", LEASE_SECONDS)
    assert (again.worker_id, again.epoch) == ("w1", 1)
    assert (await side.workers.lead("w2", LEASE_SECONDS)).worker_id == "w1"
    renewed = await side.workers.lead("w1", LEASE_SECONDS)
    assert renewed.expires_at >= first.expires_at
    assert await side.workers.leader() == renewed


async def test_a_lapsed_leadership_is_taken_over_with_a_new_epoch(side: Side) -> None:
    old = await side.workers.lead("w1", 0)
    new = await side.workers.lead("w2", LEASE_SECONDS)
    assert (new.worker_id, new.epoch) == ("w2", old.epoch + 1)
    assert (await side.workers.lead("w1", LEASE_SECONDS)).worker_id == "w2"


async def test_a_job_runs_once_for_its_due_time(side: Side) -> None:
    leader = await side.workers.lead("w1", LEASE_SECONDS)
    assert await side.workers.record_job_run("nightly", "2026-11-30T04:00", leader)
    assert not await side.workers.record_job_run("nightly", "2026-11-30T04:00", leader)
    assert await side.workers.record_job_run("nightly", "2026-12-01T04:00", leader)


async def test_a_stale_leaders_job_run_is_refused(side: Side) -> None:
    stale = await side.workers.lead("w1", 0)
    leader = await side.workers.lead("w2", LEASE_SECONDS)
    with pytest.raises(LeaseLost):
        await side.workers.record_job_run("nightly", "2026-11-30T04:00", stale)
    # nothing was recorded: the new leader runs it
    assert await side.workers.record_job_run("nightly", "2026-11-30T04:00", leader)


# ---- the registry ---------------------------------------------------------------------------


async def test_workers_are_listed_with_their_live_leases(side: Side) -> None:
    await side.workers.register_worker("w1", "host-a", 101)
    await side.workers.register_worker("w2", "host-b", 202)
    await side.add_pending("tg:1|ava")
    await side.add_pending("tg:2|ava")
    await side.add_pending("tg:3|ava")
    [lease, _, _] = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
    await side.workers.release_leases([lease])
    assert await side.workers.claim_review("w1", "s1", LEASE_SECONDS) is not None
    listed = [(w.worker_id, w.host, w.pid, w.leases) for w in await side.workers.workers()]
    # chats only: a review this worker runs is a lease too, but not a chat
    assert listed == [("w1", "host-a", 101, 0), ("w2", "host-b", 202, 2)]


async def test_a_worker_that_leaves_lets_its_leases_and_leadership_go_at_once(
    side: Side,
) -> None:
    await side.workers.register_worker("w1", "host-a", 101)
    await side.add_pending("tg:1|ava")
    [lease] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    led = await side.workers.lead("w1", LEASE_SECONDS)
    await side.workers.leave("w1")
    assert await side.workers.workers() == []
    [taken] = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
    assert taken.epoch == lease.epoch + 1
    assert (await side.workers.lead("w2", LEASE_SECONDS)).epoch == led.epoch + 1


async def test_a_worker_restarted_under_its_id_holds_nothing_from_before(side: Side) -> None:
    await side.workers.register_worker("w1", "host-a", 1)
    await side.add_pending("tg:1|ava")
    [before] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    await side.workers.register_worker("w1", "host-a", 1)
    assert await side.workers.heartbeat("w1", LEASE_SECONDS, [before]) == []
    [after] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
    assert after.epoch == before.epoch + 1


async def test_postgres_wakes_listeners_when_a_pending_message_is_stored(
    postgres_side: PostgresSide,
) -> None:
    woken: asyncio.Queue[str] = asyncio.Queue()
    async with living(postgres_side, woken.put_nowait, _unexpected):
        await postgres_side.add_pending("tg:7|ava")
        assert await asyncio.wait_for(woken.get(), timeout=WAIT_SECONDS) == "tg:7|ava"


# ---- liveness (PostgreSQL): a worker's connection holds a lock for as long as it lives -------


@pytest.fixture
async def postgres_side(postgres_database: str) -> AsyncIterator[PostgresSide]:
    pool = await create_pool(postgres_database)
    async with pool.acquire() as db:
        await migrate(db, _no_recompute)
    yield PostgresSide(pool)
    await pool.close()


def _unexpected() -> None:
    raise AssertionError("the liveness connection was lost, and no test dropped it")


def _no_wake(queue_key: str) -> None:
    del queue_key


@contextlib.asynccontextmanager
async def living(
    side: PostgresSide, wake: Callable[[str], None], lost: Callable[[], None]
) -> AsyncIterator[Liveness]:
    """Worker ``w1`` registered and holding its liveness for the block."""
    await side.workers.register_worker("w1", "host-a", 1)
    liveness = await side.workers.hold_liveness("w1", wake, lost)
    try:
        yield liveness
    finally:
        await liveness.close()


async def test_postgres_a_dead_workers_leases_and_leadership_are_free_at_once(
    postgres_side: PostgresSide,
) -> None:
    side = postgres_side
    async with living(side, _no_wake, lambda: None):
        await side.add_pending("tg:1|ava")
        [lease] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
        led = await side.workers.lead("w1", LEASE_SECONDS)
        await drop_liveness_connection(side.pool, "w1")
        # a minute-long lease and leadership: only the holder's death can free them now
        [taken] = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
        assert (taken.worker_id, taken.epoch) == ("w2", lease.epoch + 1)
        leader = await side.workers.lead("w2", LEASE_SECONDS)
        assert (leader.worker_id, leader.epoch) == ("w2", led.epoch + 1)


async def test_postgres_a_dead_workers_idle_leases_are_let_go_by_anothers_heartbeat(
    postgres_side: PostgresSide,
) -> None:
    side = postgres_side
    async with living(side, _no_wake, lambda: None):
        await side.add_pending("tg:1|ava")
        [lease] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
        await drop_liveness_connection(side.pool, "w1")
        assert await side.workers.heartbeat("w2", LEASE_SECONDS, []) == []
        assert await side.workers.lease(lease.queue_key) == replace(
            lease, worker_id="", expires_at=0
        )


async def test_postgres_a_live_worker_that_stopped_beating_keeps_its_leases_until_they_lapse(
    postgres_side: PostgresSide,
) -> None:
    """A paused worker keeps its connection, and so its lock: the clock alone frees what it
    holds, as before."""
    side = postgres_side
    async with living(side, _no_wake, _unexpected):
        await side.add_pending("tg:1|ava")
        await side.add_pending("tg:2|ava")
        [held] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 1)
        [lapsed] = await side.workers.claim_queue_keys("w1", 0, 1)
        led = await side.workers.lead("w1", LEASE_SECONDS)
        await side.workers.heartbeat("w2", LEASE_SECONDS, [])
        assert await side.workers.lease(held.queue_key) == held
        [taken] = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
        assert (taken.queue_key, taken.epoch) == (lapsed.queue_key, lapsed.epoch + 1)
        assert await side.workers.lead("w2", LEASE_SECONDS) == led


async def test_postgres_a_worker_whose_liveness_connection_dropped_takes_its_lock_again(
    postgres_side: PostgresSide,
) -> None:
    side = postgres_side
    lost = asyncio.Event()
    async with living(side, _no_wake, lost.set) as liveness:
        dropped = await drop_liveness_connection(side.pool, "w1")
        await asyncio.wait_for(lost.wait(), WAIT_SECONDS)
        assert not await liveness.check()
        await liveness.reopen()
        assert await liveness.check()
        holder = await liveness_holder(side.pool, "w1")
        assert holder is not None and holder != dropped
        await side.add_pending("tg:1|ava")
        [lease] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
        assert await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10) == []
        await side.workers.heartbeat("w2", LEASE_SECONDS, [])
        assert await side.workers.lease(lease.queue_key) == lease


async def test_postgres_a_reopened_liveness_connection_listens_again(
    postgres_side: PostgresSide,
) -> None:
    side = postgres_side
    woken: asyncio.Queue[str] = asyncio.Queue()
    async with living(side, woken.put_nowait, lambda: None) as liveness:
        await drop_liveness_connection(side.pool, "w1")
        await liveness.reopen()
        await side.add_pending("tg:7|ava")
        assert await asyncio.wait_for(woken.get(), timeout=WAIT_SECONDS) == "tg:7|ava"


# ---- fencing: a turn's writes under a lease another worker took over -------------------------


async def _taken_over(store: Store) -> tuple[Lease, Lease, int]:
    """A pending message whose lease w1 held (epoch 1) and w2 took over (epoch 2)."""
    message_id = await store.add_message(_pending("tg:1|ava"))
    assert message_id is not None
    [stale] = await store.claim_queue_keys("w1", 0, 10)
    [current] = await store.claim_queue_keys("w2", LEASE_SECONDS, 10)
    return stale, current, message_id


def _reply() -> NewMessage:
    return NewMessage(
        chat_key="tg:1", role="assistant", text="hi", audience="dm", status="delivering"
    )


async def test_a_stale_epochs_finish_turn_is_refused_and_writes_nothing(store: Store) -> None:
    stale, current, message_id = await _taken_over(store)
    with pytest.raises(LeaseLost):
        await store.finish_turn([message_id], None, _reply(), lease=stale)
    assert [row.id for row in await store.pending("tg:1|ava")] == [message_id]
    assert (await store.turn_context("tg:1|ava", 0)).unfinished == []
    reply_id = await store.finish_turn([message_id], None, _reply(), lease=current)
    assert await store.pending("tg:1|ava") == []
    assert (await store.turn_context("tg:1|ava", 0)).unfinished == [reply_id]


async def test_a_stale_epochs_finish_turn_books_no_tokens_and_leaves_the_session_alone(
    store: Store,
) -> None:
    stale, current, message_id = await _taken_over(store)
    await store.upsert_chat("tg:1", "tg", "1", None, "dm", None)
    session = await store.create_session(
        partner_id="ava", chat_key="tg:1", user_key=None, audience="dm", system_prompt="p"
    )
    reply = replace(_reply(), media=(NewMedia("react", "❤"),))
    spent = NewUsage("2026-03-09", "ava", "chat", "m1", 120, 30)
    with pytest.raises(LeaseLost):
        await store.finish_turn([message_id], session.id, reply, usage=spent, lease=stale)
    assert await store.usage("2026-03-09") == []
    untouched = await store.session(session.id)
    assert untouched is not None and untouched.last_active_at == session.last_active_at
    reply_id = await store.finish_turn([message_id], session.id, reply, usage=spent, lease=current)
    assert await store.tokens_on("2026-03-09") == {"ava": 150}
    assert [a.kind for a in (await store.media_for([reply_id]))[reply_id]] == ["react"]


async def test_postgres_refuses_a_finish_turn_whose_lease_was_taken_over_while_it_waited(
    postgres_database: str,
) -> None:
    """The statement that records a turn's outcome locks the lease row: a takeover that
    commits while it waits for that lock is seen, not the older snapshot, and nothing of the
    turn is written."""
    store = await open_store(postgres_database)
    rival = await asyncpg.connect(postgres_database)
    watcher = await asyncpg.connect(postgres_database)
    try:
        message_id = await store.add_message(_pending("tg:1|ava"))
        assert message_id is not None
        [stale] = await store.claim_queue_keys("w1", LEASE_SECONDS, 10)
        takeover = rival.transaction()
        await takeover.start()
        await rival.execute(
            "UPDATE chat_leases SET worker_id = 'w2', epoch = epoch + 1 WHERE queue_key = $1",
            stale.queue_key,
        )
        finishing = asyncio.create_task(
            store.finish_turn([message_id], None, _reply(), lease=stale)
        )
        await _until_waiting_for_a_lock(watcher)
        await takeover.commit()
        with pytest.raises(LeaseLost):
            await finishing
        assert [row.id for row in await store.pending("tg:1|ava")] == [message_id]
        assert (await store.turn_context("tg:1|ava", 0)).unfinished == []
    finally:
        await watcher.close()
        await rival.close()
        await store.close()


async def _until_waiting_for_a_lock(watcher: asyncpg.Connection) -> None:
    """Until some statement in the watcher's database waits for a row lock."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not await watcher.fetchval(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ):
        if loop.time() > deadline:
            raise AssertionError(f"no statement waited for a lock within {WAIT_SECONDS:g}s")
        await asyncio.sleep(0.01)


async def test_a_stale_epochs_failure_count_and_quiet_close_are_refused(store: Store) -> None:
    stale, current, message_id = await _taken_over(store)
    with pytest.raises(LeaseLost):
        await store.count_failed_turn([message_id], lease=stale)
    assert await store.turn_attempts(message_id) == 0
    with pytest.raises(LeaseLost):
        await store.close_unanswered([message_id], "s1", lease=stale)
    assert [row.id for row in await store.pending("tg:1|ava")] == [message_id]
    assert await store.count_failed_turn([message_id], lease=current) == 1


async def test_a_stale_epochs_chunk_records_are_refused_and_write_nothing(store: Store) -> None:
    stale, current, message_id = await _taken_over(store)
    reply_id = await store.finish_turn([message_id], None, _reply(), lease=current)
    with pytest.raises(LeaseLost):
        await store.record_chunk(reply_id, 0, "p1", lease=stale)
    with pytest.raises(LeaseLost):
        await store.record_last_chunk(reply_id, 0, "p1", lease=stale)
    with pytest.raises(LeaseLost):
        await store.mark_delivered(reply_id, lease=stale)
    assert await store.delivered_chunks(reply_id) == 0
    assert (await store.turn_context("tg:1|ava", 0)).unfinished == [reply_id]
    await store.record_last_chunk(reply_id, 0, "p1", lease=current)
    assert await store.delivered_chunks(reply_id) == 1
    assert (await store.turn_context("tg:1|ava", 0)).unfinished == []


async def test_a_stale_epochs_delivery_retry_and_give_up_are_refused(store: Store) -> None:
    stale, current, message_id = await _taken_over(store)
    reply_id = await store.finish_turn([message_id], None, _reply(), lease=current)
    retry = DeliveryRetry(reply_id, 1, 0.0, 10.0, "502")
    with pytest.raises(LeaseLost):
        await store.schedule_delivery_retry(retry, lease=stale)
    assert await store.delivery_retry(reply_id) is None
    with pytest.raises(LeaseLost):
        await store.mark_failed(reply_id, lease=stale)
    assert (await store.message(reply_id)).status == "delivering"  # type: ignore[union-attr]
    await store.schedule_delivery_retry(retry, lease=current)
    assert await store.delivery_retry(reply_id) == retry


async def test_postgres_after_a_restart_a_worker_that_has_not_locked_again_is_not_dead(
    postgres_server: PostgresServer, postgres_side: PostgresSide
) -> None:
    """A restart ends every worker's liveness session at once, alive or not: until a worker
    locks again, its leases lapse by the clock only, so the first worker back does not take
    every other worker's chats; one that locked again and then dies is dead at once."""
    side = postgres_side
    async with living(side, _no_wake, lambda: None) as liveness:
        await side.add_pending("tg:1|ava")
        [lease] = await side.workers.claim_queue_keys("w1", LEASE_SECONDS, 10)
        await asyncio.to_thread(postgres_server.restart)
        assert await _until_answering(side.workers, "w2") == []
        assert await side.workers.lease(lease.queue_key) == lease
        await liveness.reopen()
        await drop_liveness_connection(side.pool, "w1")
        [taken] = await side.workers.claim_queue_keys("w2", LEASE_SECONDS, 10)
        assert taken.epoch == lease.epoch + 1


async def _until_answering(workers: PostgresWorkers, worker_id: str) -> list[Lease]:
    """The first claim the pool gets through after a restart (its idle connections were cut:
    the first calls may meet one of them, and the store says so)."""
    for _ in range(10):
        with contextlib.suppress(StoreUnavailable):
            return await workers.claim_queue_keys(worker_id, LEASE_SECONDS, 10)
    raise AssertionError("the pool never got a connection after the restart")
