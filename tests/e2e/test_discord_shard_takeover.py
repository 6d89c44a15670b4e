"""A dead or paused worker's Discord shard is connected by another (docs/workers.md): two
``companion run`` workers on one PostgreSQL database divide a bot of two shards
through leases.

Killed with SIGKILL, the worker holding shard 0 (which carries every direct message) loses its
PostgreSQL session with its socket, and with it the lock that said it lived: the other worker
connects shard 0 long before the dead worker's minute-long lease would have lapsed, and a
direct message sent then is answered. Paused with SIGSTOP, it keeps its lock and its
connections: its shard is taken over once its lease lapsed, and it lets the shard go as soon as
it runs again.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from tests.e2e.cluster import WORKER_SECTION, Cluster
from tests.e2e.conftest import ClusterFactory, World
from tests.e2e.traffic import STEP_TIMEOUT_SECONDS, poll
from tests.fakes.fake_discord import FakeDiscord, RestCall

DISCORD_TOKEN = "E2E-SECRET-discord-token"
OWNER = 1
ALICE = 5
LONG_LEASES = {"lease_seconds": 60}
"""Leases that outlive the test's waits: only the dead worker's lost lock can explain a
takeover within them (the heartbeat stays at its default)."""
SHARD_ZERO = [0, 2]


def discord_settings(discord: FakeDiscord) -> dict[str, object]:
    return {
        "token": DISCORD_TOKEN,
        "api_base": discord.api_base,
        "gateway_url": discord.gateway_url,
        "shards": 2,
    }


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=DISCORD_TOKEN) as server:
        server.add_user(ALICE, "alice")
        yield server


async def test_a_killed_workers_shard_is_connected_by_another_and_answers_direct_messages(
    world: World, cluster_of: ClusterFactory, discord: FakeDiscord
) -> None:
    cluster = await cluster_of(
        2,
        telegram=None,
        discord=discord_settings(discord),
        owner={"discord_ids": [OWNER]},
        workers=LONG_LEASES,
    )
    await poll(lambda: _one_shard_each(cluster), "one shard on each worker")
    holder = await _slot_holding(cluster, 0)
    [(dead, lapses_at)] = await _shard_zero(cluster)
    identified = _identifies(discord, SHARD_ZERO)

    await cluster.kill(holder)
    await discord.wait_until(
        lambda: _identifies(discord, SHARD_ZERO) > identified and discord.serving(SHARD_ZERO),
        STEP_TIMEOUT_SECONDS,
        "shard 0 connected by the other worker",
    )
    [(taker, _)] = await _shard_zero(cluster)
    [now] = await cluster.query("SELECT extract(epoch FROM clock_timestamp()) AS now")
    assert taker != dead and float(now["now"]) < lapses_at  # the dead's lease still ran
    tag = world.tag()
    await discord.dm_message(user_id=ALICE, content=f"are you there? #{tag}")
    await discord.wait_until(lambda: _replies_naming(discord, tag), STEP_TIMEOUT_SECONDS,
                             f"the answer naming #{tag}")  # fmt: skip
    assert discord.shard_overlaps == []


async def test_a_paused_workers_shard_is_taken_over_and_let_go_when_it_runs_again(
    cluster_of: ClusterFactory, discord: FakeDiscord
) -> None:
    cluster = await cluster_of(
        2,
        telegram=None,
        discord=discord_settings(discord),
        owner={"discord_ids": [OWNER]},
        workers=WORKER_SECTION,  # leases of 3 s
    )
    await poll(lambda: _one_shard_each(cluster), "one shard on each worker")
    holder = await _slot_holding(cluster, 0)
    [(paused, _)] = await _shard_zero(cluster)
    identified = _identifies(discord, SHARD_ZERO)

    cluster.pause(holder)
    await discord.wait_until(
        lambda: _identifies(discord, SHARD_ZERO) > identified,
        STEP_TIMEOUT_SECONDS,
        "shard 0 connected by the other worker",
    )
    [(taker, _)] = await _shard_zero(cluster)
    assert taker != paused
    # the paused worker's connection is still open: shard 0's events reach both meanwhile
    assert discord.serving(SHARD_ZERO) == 2
    cluster.resume(holder)
    await discord.wait_until(
        lambda: discord.serving(SHARD_ZERO) == 1,
        STEP_TIMEOUT_SECONDS,
        "the resumed worker letting shard 0 go",
    )
    await poll(lambda: _one_shard_each(cluster), "one shard on each worker again")
    assert await _slot_holding(cluster, 0) != holder  # shard 0 stays where it went


async def _shard_zero(cluster: Cluster) -> list[tuple[str, float]]:
    rows = await cluster.query(
        "SELECT worker_id, expires_at FROM shard_leases WHERE shard_count = 2 AND shard_id = 0"
    )
    return [(str(row["worker_id"]), float(row["expires_at"])) for row in rows]


async def _one_shard_each(cluster: Cluster) -> bool:
    rows = await cluster.query(
        "SELECT DISTINCT worker_id FROM shard_leases WHERE shard_count = 2 AND worker_id <> ''"
        " AND expires_at > extract(epoch FROM clock_timestamp())"
    )
    return len(rows) == 2


async def _worker_id(cluster: Cluster, slot: int) -> str:
    [row] = await cluster.query(
        "SELECT worker_id FROM workers WHERE pid = $1", cluster.workers[slot].pid
    )
    return str(row["worker_id"])


async def _slot_holding(cluster: Cluster, shard_id: int) -> int:
    [row] = await cluster.query(
        "SELECT worker_id FROM shard_leases WHERE shard_count = 2 AND shard_id = $1", shard_id
    )
    for slot in cluster.workers:
        if await _worker_id(cluster, slot) == row["worker_id"]:
            return slot
    raise AssertionError(f"no running worker holds shard {shard_id}")


def _identifies(discord: FakeDiscord, shard: list[int]) -> int:
    return [identify.get("shard") for identify in discord.identifies].count(shard)


def _replies_naming(discord: FakeDiscord, tag: str) -> list[RestCall]:
    pattern = re.compile(rf"#{tag}\b")
    return [
        call
        for call in discord.rest_calls
        if call.ok
        and call.method == "POST"
        and call.path.endswith("/messages")
        and pattern.search(str((call.json or {}).get("content", "")))
    ]
