"""A killed worker's chats and leadership are taken over at once (docs/workers.md): two ``companion
run`` workers on one PostgreSQL database with minute-long leases.
The leader, holding a chat whose answer the model keeps back, is killed with SIGKILL; its
PostgreSQL session ends with its socket, and with it the lock that said it lived. The other
worker leads and answers both that chat and a message sent right after the kill long before
the dead worker's lease would have lapsed.
"""

from __future__ import annotations

import asyncio

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import ClusterFactory, World
from tests.e2e.traffic import FIRST_CHAT, STEP_TIMEOUT_SECONDS, poll

LONG_LEASES = {"lease_seconds": 60}
"""A lease and a leadership that outlive the test's waits: only the dead worker's lost lock
can explain a takeover within them (the heartbeat stays at its default)."""
TAKEOVER_TIMEOUT_SECONDS = 30.0
"""How long the test waits for the answers: half the lease, so the clock cannot be why."""


async def test_a_killed_leaders_chats_and_leadership_are_taken_over_at_once(
    world: World, cluster_of: ClusterFactory
) -> None:
    cluster = await cluster_of(2, workers=LONG_LEASES)
    dead = await _worker_id(cluster, 0)
    assert await _leader(cluster) == dead  # the first to start leads
    # worker 0 alone can claim the chat (worker 1 is stopped meanwhile): its turn waits on
    # the model when it dies
    held = world.tag()
    cluster.pause(1)
    world.send(FIRST_CHAT, f"are you there? #{held} hold-llm")
    await asyncio.wait_for(world.model.arrived(held).wait(), STEP_TIMEOUT_SECONDS)
    cluster.resume(1)
    [(lease_holder, lapses_at)] = await _leases_on(cluster, FIRST_CHAT)
    assert lease_holder == dead

    await cluster.kill(0)
    after = world.tag()
    world.send(FIRST_CHAT + 1, f"hello #{after}")

    await world.wait_for_reply(after, timeout=TAKEOVER_TIMEOUT_SECONDS)
    await world.wait_for_reply(held, timeout=TAKEOVER_TIMEOUT_SECONDS)
    survivor = await _worker_id(cluster, 1)
    assert await _leader(cluster) == survivor
    await poll(lambda: _holds_nothing(cluster, dead), f"{dead}'s leases gone")
    [now] = await cluster.query("SELECT extract(epoch FROM clock_timestamp()) AS now")
    assert float(now["now"]) < lapses_at  # the dead worker's lease would still be running


async def _worker_id(cluster: Cluster, slot: int) -> str:
    [row] = await cluster.query(
        "SELECT worker_id FROM workers WHERE pid = $1", cluster.workers[slot].pid
    )
    return str(row["worker_id"])


async def _leader(cluster: Cluster) -> str:
    [row] = await cluster.query("SELECT worker_id FROM leader")
    return str(row["worker_id"])


async def _leases_on(cluster: Cluster, chat_id: int) -> list[tuple[str, float]]:
    rows = await cluster.query(
        "SELECT worker_id, expires_at FROM chat_leases WHERE queue_key LIKE $1",
        f"telegram:{chat_id}|%",
    )
    return [(str(row["worker_id"]), float(row["expires_at"])) for row in rows]


async def _holds_nothing(cluster: Cluster, worker_id: str) -> bool:
    return not await cluster.query("SELECT 1 FROM chat_leases WHERE worker_id = $1", worker_id)
