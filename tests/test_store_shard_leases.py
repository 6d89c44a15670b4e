"""Leases on the Discord bot's shards, on both backends (bot/store/workers.py and its
PostgreSQL twin): each shard of a bot with a given shard count is held by one worker at a
time under a fencing epoch, renewed by its holder, given back at once when it lets go or
leaves, and free at once on PostgreSQL when its holder died. A lease given for 0 seconds has
lapsed by the next statement, which is how these tests make one expire without waiting."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from bot.store import ShardLease, Store
from bot.store.opening import open_store
from tests.liveness_support import drop_liveness_connection

LEASE_SECONDS = 60.0


def held(leases: list[ShardLease]) -> list[tuple[int, str]]:
    return [(lease.shard_id, lease.worker_id) for lease in leases]


async def test_free_shards_are_leased_lowest_first_and_each_to_one_worker(store: Store) -> None:
    assert held(await store.claim_shards("w1", 3, LEASE_SECONDS, 1)) == [(0, "w1")]
    assert held(await store.claim_shards("w2", 3, LEASE_SECONDS, 5)) == [(1, "w2"), (2, "w2")]
    assert await store.claim_shards("w3", 3, LEASE_SECONDS, 5) == []
    assert held(await store.shard_leases(3)) == [(0, "w1"), (1, "w2"), (2, "w2")]


async def test_two_workers_claiming_at_once_never_get_the_same_shard(store: Store) -> None:
    first, second = await asyncio.gather(
        store.claim_shards("w1", 4, LEASE_SECONDS, 4),
        store.claim_shards("w2", 4, LEASE_SECONDS, 4),
    )
    shards = [lease.shard_id for lease in first + second]
    assert sorted(shards) == [0, 1, 2, 3]


async def test_a_bot_with_another_shard_count_has_leases_of_its_own(store: Store) -> None:
    await store.claim_shards("w1", 2, LEASE_SECONDS, 2)
    [lease] = await store.claim_shards("w2", 1, LEASE_SECONDS, 1)
    assert (lease.shard_count, lease.shard_id, lease.worker_id) == (1, 0, "w2")


async def test_renewing_extends_a_held_shard_and_keeps_its_epoch(store: Store) -> None:
    [lease] = await store.claim_shards("w1", 1, 0.0, 1)
    [renewed] = await store.renew_shards("w1", LEASE_SECONDS, [lease])
    assert renewed.epoch == lease.epoch and renewed.expires_at > lease.expires_at
    assert await store.claim_shards("w2", 1, LEASE_SECONDS, 1) == []


async def test_a_lapsed_shard_is_taken_over_under_a_new_epoch_and_its_old_holder_cannot_renew(
    store: Store,
) -> None:
    [lapsed] = await store.claim_shards("w1", 1, 0.0, 1)
    [taken] = await store.claim_shards("w2", 1, LEASE_SECONDS, 1)
    assert (taken.worker_id, taken.epoch) == ("w2", lapsed.epoch + 1)
    assert await store.renew_shards("w1", LEASE_SECONDS, [lapsed]) == []
    assert held(await store.shard_leases(1)) == [(0, "w2")]


async def test_a_released_shard_is_free_at_once_and_keeps_its_epoch(store: Store) -> None:
    [lease] = await store.claim_shards("w1", 1, LEASE_SECONDS, 1)
    await store.release_shards([lease])
    [taken] = await store.claim_shards("w2", 1, LEASE_SECONDS, 1)
    assert (taken.worker_id, taken.epoch) == ("w2", lease.epoch + 1)


async def test_releasing_a_shard_taken_over_meanwhile_leaves_the_new_holder_alone(
    store: Store,
) -> None:
    [lapsed] = await store.claim_shards("w1", 1, 0.0, 1)
    [taken] = await store.claim_shards("w2", 1, LEASE_SECONDS, 1)
    await store.release_shards([lapsed])
    assert await store.shard_leases(1) == [taken]


async def test_a_renewal_gives_back_the_shards_under_its_worker_it_does_not_name(
    store: Store,
) -> None:
    kept, forgotten = await store.claim_shards("w1", 2, LEASE_SECONDS, 2)
    assert await store.renew_shards("w1", LEASE_SECONDS, [kept]) != []
    [taken] = await store.claim_shards("w2", 2, LEASE_SECONDS, 2)
    assert (taken.shard_id, taken.epoch) == (forgotten.shard_id, forgotten.epoch + 1)


async def test_a_worker_that_leaves_lets_its_shards_go_at_once(store: Store) -> None:
    await store.register_worker("w1", "host-a", 1)
    await store.claim_shards("w1", 2, LEASE_SECONDS, 2)
    await store.leave("w1")
    assert held(await store.claim_shards("w2", 2, LEASE_SECONDS, 2)) == [(0, "w2"), (1, "w2")]


async def test_a_worker_restarted_under_its_id_holds_no_shard_from_before(store: Store) -> None:
    await store.register_worker("w1", "host-a", 1)
    [before] = await store.claim_shards("w1", 1, LEASE_SECONDS, 1)
    await store.register_worker("w1", "host-a", 2)
    assert await store.renew_shards("w1", LEASE_SECONDS, [before]) == []
    assert held(await store.claim_shards("w2", 1, LEASE_SECONDS, 1)) == [(0, "w2")]


async def test_the_workers_dividing_a_bots_shards_are_those_that_joined_and_beat_lately(
    store: Store,
) -> None:
    for worker, pid in (("w1", 1), ("w2", 2), ("telegram-only", 3), ("other-count", 4)):
        await store.register_worker(worker, "host-a", pid)
    await store.join_shards("w1", 2)
    await store.join_shards("w2", 2)
    await store.join_shards("other-count", 4)
    assert await store.shard_workers(2, LEASE_SECONDS) == 2
    assert await store.shard_workers(2, 0.0) == 0  # neither beat within the last no time
    await store.leave("w2")
    assert await store.shard_workers(2, LEASE_SECONDS) == 1


async def test_a_worker_restarted_under_its_id_divides_no_shards_until_it_joins_again(
    store: Store,
) -> None:
    await store.register_worker("w1", "host-a", 1)
    await store.join_shards("w1", 2)
    await store.register_worker("w1", "host-a", 2)
    assert await store.shard_workers(2, LEASE_SECONDS) == 0


# ---- PostgreSQL: a dead holder --------------------------------------------------------------


@pytest.fixture
async def postgres_store(postgres_database: str) -> AsyncIterator[Store]:
    opened = await open_store(postgres_database)
    yield opened
    await opened.close()


@pytest.fixture
async def dead_holder(postgres_store: Store, postgres_database: str) -> ShardLease:
    """Worker w1 held shard 0 of 1 for a minute and died (its liveness lock went)."""
    await postgres_store.register_worker("w1", "host-a", 1)
    await postgres_store.join_shards("w1", 1)
    liveness = await postgres_store.hold_liveness("w1", lambda _key: None, lambda: None)
    [lease] = await postgres_store.claim_shards("w1", 1, LEASE_SECONDS, 1)
    connection = await asyncpg.connect(postgres_database)
    try:
        await drop_liveness_connection(connection, "w1")
    finally:
        await connection.close()
        await liveness.close()
    return lease


async def test_postgres_a_dead_workers_shard_is_free_at_once(
    postgres_store: Store, dead_holder: ShardLease
) -> None:
    # a minute-long lease: only its holder's death can free it now
    [taken] = await postgres_store.claim_shards("w2", 1, LEASE_SECONDS, 1)
    assert (taken.worker_id, taken.epoch) == ("w2", dead_holder.epoch + 1)


async def test_postgres_a_dead_worker_divides_no_shards(
    postgres_store: Store, dead_holder: ShardLease
) -> None:
    await postgres_store.register_worker("w2", "host-b", 2)
    await postgres_store.join_shards("w2", 1)
    assert dead_holder.worker_id == "w1"
    assert await postgres_store.shard_workers(1, LEASE_SECONDS) == 1
