"""Several workers on one PostgreSQL: killing any of them at any time loses nothing and doubles
nothing (docs/architecture.md "Decisions", "Several workers"). A paused worker is
``test_paused_worker.py``'s.

Two and four ``companion run`` workers share one database, the fake Bot API and the scripted fake
LLM (``tests/e2e/model.py``: every answer names the tags it answers, ``long`` answers come in three
chunks, reviews write ``reviewed mN`` into memory). In each round a few chats get messages, and
once the model has seen one of them, at a random moment a random worker is killed with SIGKILL and
started again. At the end every message was answered, exactly once — except a chunk Telegram took
from a worker that died before recording it, the one repeat the docs/delivery.md allows; replies in
each chat came in the order of its messages; no turn ran twice unless a kill cut it off; every
review ran once and memory holds each of its entries once (a review a kill cut off is claimed again
by another worker's heartbeat and, run over the same part, writes nothing twice).

With several workers alive, the test cannot tell which worker made a Telegram call: a send of a
living worker that is not yet recorded when another worker is killed is counted as allowed to
repeat too. That loosens the bound, never tightens it: a repeat beyond it is a real double.

``make test`` runs ``SOAK_KILLS`` = 5 kills per cluster size, ``make soak`` 50; a failing run
names its seed, and ``E2E_SEED=<seed>`` repeats it.
"""

from __future__ import annotations

import asyncio
import os
import random
import re

import pytest

from tests.e2e.cluster import WORKER_SECTION, Cluster
from tests.e2e.conftest import OWNER, ClusterFactory, World, assert_no_secrets
from tests.e2e.model import CHUNKS_OF_LONG
from tests.e2e.traffic import (
    SEED,
    STEP_TIMEOUT_SECONDS,
    Ledger,
    assert_each_shown_once,
    assert_order_kept,
    chunks_of,
    poll,
    send_round,
    settle,
)

KILLS = int(os.environ.get("SOAK_KILLS", "5"))
ANSWER_DELAY_SECONDS = 0.3
"""Each chat answer takes this long: kills and pauses find turns in flight."""
MAX_KILL_DELAY_SECONDS = 1.0
"""The random kill moment: up to this long after the model saw the round's first message."""


@pytest.mark.parametrize("size", [2, 4])
async def test_killing_random_workers_at_random_points_loses_and_doubles_nothing(
    world: World, cluster_of: ClusterFactory, size: int
) -> None:
    rng = random.Random(SEED + size)
    ledger = Ledger()
    world.model.answer_delay_seconds = ANSWER_DELAY_SECONDS
    cluster = await cluster_of(size, memory={"auto_memory": True}, workers=WORKER_SECTION)
    for round_number in range(KILLS):
        tags = send_round(world, rng, ledger)
        await world.telegram.wait_until(
            lambda tags=tags: any(world.model.chat_requests.get(t) for t in tags),
            STEP_TIMEOUT_SECONDS,
            f"the model to see one of {tags}",
        )
        await asyncio.sleep(rng.uniform(0, MAX_KILL_DELAY_SECONDS))  # the random kill moment
        slot = rng.choice(cluster.alive())
        ledger.log.append(f"round {round_number}: kill worker {slot} with {tags} sent")
        await cluster.kill(slot)
        await note_what_the_kill_left(cluster, ledger)
        await cluster.start(slot)
    await settle(world, cluster, ledger)
    await check_replies(world, cluster, ledger)
    await review_every_chat(world, cluster, ledger)
    await check_memory(world, cluster, ledger)


# ---- kills and reviews ------------------------------------------------------------


async def note_what_the_kill_left(cluster: Cluster, ledger: Ledger) -> None:
    """With the worker dead: the sends Telegram took that no worker records may come once
    more, and the model calls made for messages still pending belong to cut-off turns."""
    world = cluster.world
    calls = world.telegram.calls[ledger.calls_checked :]  # up to the kill; later ones are
    ledger.calls_checked += len(calls)  # the living workers' and are looked at next time
    await world.telegram.wait_until(
        lambda: all(c.status is not None for c in calls if c.method != "getUpdates"),
        STEP_TIMEOUT_SECONDS,
        "the sends in flight at the kill to end",
    )
    for call in calls:
        taken = call.method == "sendMessage" and call.result is not None
        if taken and not await cluster.recorded(call.chat_id, call.result["message_id"]):
            ledger.unrecorded[call.text or ""] += 1
    for tag in await cluster.pending_tags(ledger.tags):
        made = world.model.chat_requests.get(tag, 0) - ledger.requests_seen.get(tag, 0)
        ledger.cut_requests[tag] += made
    ledger.requests_seen = dict(world.model.chat_requests)


async def review_every_chat(world: World, cluster: Cluster, ledger: Ledger) -> None:
    """``/new`` in every chat and ``/admin review``: each session's unreviewed part is
    reviewed (earlier parts may have been already), and every tag ends up in its user's
    memory."""
    for chat in ledger.sent:
        world.send(chat, "/new")
    # /new marks each session's review due and the workers' heartbeats run them; the owner
    # asks for them too, on whichever worker polls: a review another worker runs is left to it
    world.send(OWNER, "/admin review example", first_name="Owner")

    memory = ""

    async def all_reviewed() -> bool:
        nonlocal memory
        memory = await cluster.memory_text("example", list(ledger.sent))
        return all(f"reviewed {tag}" in memory for tag in ledger.tags)

    missing = lambda: [t for t in ledger.tags if f"reviewed {t}" not in memory]  # noqa: E731
    try:
        await poll(
            all_reviewed,
            "every message reviewed into memory",
            lambda: (
                f"{world.model.review_requests} review requests; not in memory: {missing()};"
                f" memory:\n{memory[-1500:]}\nthe workers' review log lines:\n"
                f"{review_lines(world)}"
            ),
        )
    except AssertionError as exc:
        chats = [chat for chat, tags in ledger.sent.items() if set(tags) & set(missing())]
        raise AssertionError(f"{exc}\n{await cluster.sessions_of(chats)}") from None


def review_lines(world: World) -> str:
    """What the workers logged about reviews: on a timeout, whether a review failed (and is
    retried a minute later), was taken over, or never ran."""
    lines = [
        f"[{slot}] {line}"
        for slot, process in enumerate(world.processes)
        for line in process.output.splitlines()
        if "review" in line.lower()
    ]
    return "\n".join(lines[-40:]) or "(none)"


# ---- the checks --------------------------------------------------------------------


async def check_replies(world: World, cluster: Cluster, ledger: Ledger) -> None:
    """Every message answered once (but for the documented repeats), in order, by one turn
    unless a kill cut it off; nothing pending, no secret and no error in any worker's log."""
    seed = ledger.seed()
    assert_each_shown_once(world, ledger, allowed_repeats=ledger.unrecorded)
    for tag in ledger.long_tags:
        assert len(chunks_of(world, tag)) == CHUNKS_OF_LONG, f"#{tag} {seed}"
    assert_order_kept(world, ledger)
    for tag in ledger.tags:
        calls = world.model.chat_requests.get(tag, 0)
        most = 1 + ledger.cut_requests[tag]  # these turns have no tool round: one call
        assert 1 <= calls <= most, f"#{tag}: {calls} model calls, at most {most} {seed}"
    assert await cluster.unfinished() == 0, seed
    everything = "\n".join(p.output for p in world.processes)
    assert_no_secrets(everything)
    assert [p.errors() for p in world.processes if p.errors()] == [], seed


async def check_memory(world: World, cluster: Cluster, ledger: Ledger) -> None:
    """Each review ran once: its entry is in memory once."""
    memory = await cluster.memory_text("example", list(ledger.sent))
    for tag in ledger.tags:
        count = len(re.findall(rf"reviewed {tag}\b", memory))
        assert count == 1, f"review of #{tag} saved {count} times {ledger.seed()}"
    assert [p.errors() for p in world.processes if p.errors()] == [], ledger.seed()
