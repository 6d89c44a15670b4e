"""A gateway on PostgreSQL — one alone, and two workers sharing the database — whose server
restarts under load finds its way back by itself: every message sent before, during and after the
restart is answered once, in its chat's order, and nothing is left pending (the store's outages are
StoreUnavailable, and a turn or delivery that met one is retried, docs/architecture.md "Nothing
stays pending forever"). A reply whose delivery the outage cut off is finished under its chat's
lease by whichever worker works that chat next (docs/delivery.md), so nothing waits for
a change of leader or a restart; neither test allows a single repeated chunk."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest

from tests.e2e.cluster import WORKER_SECTION
from tests.e2e.conftest import ClusterFactory, World
from tests.e2e.traffic import (
    SEED,
    STEP_TIMEOUT_SECONDS,
    Ledger,
    assert_each_shown_once,
    assert_order_kept,
    send_round,
    settle,
)
from tests.postgres_server import PostgresServer

ROUNDS_EACH_SIDE = 3
ANSWER_DELAY_SECONDS = 0.3
"""Each answer takes this long, so the restart finds turns in flight."""


@pytest.mark.parametrize("size", [1, 2])
async def test_postgresql_restarted_mid_load_the_workers_reconnect_and_lose_nothing(
    world: World, cluster_of: ClusterFactory, postgres_server: PostgresServer, size: int
) -> None:
    """One gateway with the default settings, and two workers with short leases."""
    world.model.answer_delay_seconds = ANSWER_DELAY_SECONDS
    cluster = await cluster_of(size, **({"workers": WORKER_SECTION} if size > 1 else {}))
    rng = random.Random(SEED)
    ledger = Ledger()
    for _ in range(ROUNDS_EACH_SIDE):
        send_round(world, rng, ledger)
    await world.telegram.wait_until(
        lambda: sum(world.model.chat_requests.values()) > 0, STEP_TIMEOUT_SECONDS, "a turn"
    )
    await asyncio.to_thread(postgres_server.restart)
    ledger.log.append("PostgreSQL restarted")
    for _ in range(ROUNDS_EACH_SIDE):
        send_round(world, rng, ledger)
    await settle(world, cluster, ledger)
    assert cluster.alive() == list(range(size)), "a worker exited when the database went away"
    assert_each_shown_once(world, ledger, allowed_repeats=Counter())
    assert_order_kept(world, ledger)
    assert await cluster.unfinished() == 0
