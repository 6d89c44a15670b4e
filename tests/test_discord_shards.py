"""The Discord bot's shards divided among workers on one PostgreSQL database, with the real
discord.py against the fake Discord, which routes a guild's events to shard
``(guild_id >> 22) % shards`` and DMs to shard 0, as Discord does.

Without ``discord.shard_ids`` the shards are leases in the database: each worker connects its
share, a worker joining takes shards over one at a time and a stopped one's are taken over
by the others, and no shard is ever connected by two workers at once (the fake records any
second connection to a shard). With ``discord.shard_ids`` each worker connects only the
shards it was given, and no lease is taken."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import asyncpg
import pytest

from bot.store import Store
from tests.discord_harness import (
    ALICE,
    BOT_ID,
    CHANNEL,
    GUILD,
    TIMEOUT,
    DiscordGateway,
    DiscordGateways,
    eventually,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import FakeDiscord, RestCall
from tests.fakes.fake_llm import FakeLLM, Reply

SHARD_ONE_GUILD = 1 << 22
"""Discord routes this guild to shard 1 of 2; the harness's GUILD (10) is on shard 0."""
SHARD_ONE_CHANNEL = 40
QUICK_BEATS = {"lease_seconds": 2, "heartbeat_seconds": 0.2}
"""``[workers]`` for the leased shards: shards move within a few beats of a test."""
SLOW_BEATS = {"lease_seconds": 90, "heartbeat_seconds": 30}
"""``[workers]`` for a test that assigns shards itself: the keeper beats once, at the start."""
MOVE_TIMEOUT = 20.0
"""How long a test waits for shards to move: many beats, so only a fault explains a miss."""


@dataclass
class Workers:
    """Two gateways on one database: ``zero`` holds shard 0 of 2, ``one`` shard 1."""

    zero: DiscordGateway
    one: DiscordGateway
    stop_one: Callable[[], Awaitable[None]]
    start_one: Callable[[], Awaitable[DiscordGateway]]
    """Start ``one`` again after ``stop_one``: a worker with its shard ids and data directory."""


@pytest.fixture(name="workers")
async def two_workers(
    # the database first: it is dropped only after the workers stopped
    postgres_database: str,
    fake: FakeDiscord,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> AsyncIterator[Workers]:
    fake.add_guild(SHARD_ONE_GUILD, "Second House")
    fake.add_text_channel(SHARD_ONE_GUILD, SHARD_ONE_CHANNEL, "second")
    storage = {"database_url": postgres_database}
    # each worker has a data directory of its own: they share nothing but the database
    first = DiscordGateways(fake, fake_llm, tmp_path / "zero")
    second = DiscordGateways(fake, fake_llm, tmp_path / "one")
    try:
        zero = await first.start(
            bind=((CHANNEL, "example"), (SHARD_ONE_CHANNEL, "example")),
            storage=storage,
            workers={"id": "zero"},  # one process: the default id (host-pid) would be shared
            discord={"shards": 2, "shard_ids": [0]},
        )

        async def start_one() -> DiscordGateway:
            return await second.start(
                bind=(),
                storage=storage,
                workers={"id": "one"},
                discord={"shards": 2, "shard_ids": "1"},
            )

        yield Workers(zero, await start_one(), second.stop_all, start_one)
    finally:
        await second.stop_all()
        await first.stop_all()


def cached_ids(worker: DiscordGateway) -> set[int]:
    """The messages this worker's discord.py client received over its gateway connection."""
    return {message.id for message in worker.channel.client.cached_messages}


def history_reads(fake: FakeDiscord, channel_id: int) -> list[RestCall]:
    return fake.calls("GET", f"/channels/{channel_id}/messages")


async def test_each_worker_connects_only_its_shards(workers: Workers, fake: FakeDiscord) -> None:
    assert sorted(identify["shard"] for identify in fake.identifies) == [[0, 2], [1, 2]]
    assert [guild.id for guild in workers.zero.channel.client.guilds] == [GUILD]
    assert [guild.id for guild in workers.one.channel.client.guilds] == [SHARD_ONE_GUILD]
    assert not fake.calls("GET", "/gateway/bot")  # the count is configured, not asked for


async def test_a_guild_message_reaches_only_the_worker_holding_its_shard(
    workers: Workers, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply(text="Welcome to the second house"))
    sent = await fake.message_create(
        channel_id=SHARD_ONE_CHANNEL,
        author_id=ALICE,
        content=f"<@{BOT_ID}> hello from shard one",
        mentions=[BOT_ID],
    )
    [reply] = await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the reply")
    assert reply.json["content"] == "Welcome to the second house"
    assert int(sent["id"]) in cached_ids(workers.one)
    assert int(sent["id"]) not in cached_ids(workers.zero)
    await workers.one.app.dispatcher.idle()
    await workers.zero.app.dispatcher.idle()
    assert len(fake_llm.requests) == 1 and len(fake.webhook_messages()) == 1


async def test_direct_messages_reach_the_worker_holding_shard_zero(
    workers: Workers, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply(text="Hello Alice"))
    sent = await fake.dm_message(user_id=ALICE, content="hi there")
    dm = fake.dm_channel_id(ALICE)
    await fake.wait_for_rest(lambda call: call.ok and call.path == f"/channels/{dm}/messages")
    assert int(sent["id"]) in cached_ids(workers.zero)
    assert int(sent["id"]) not in cached_ids(workers.one)


async def test_each_worker_catches_up_only_the_bound_channels_of_its_shards(
    workers: Workers, fake: FakeDiscord
) -> None:
    await eventually(
        lambda: workers.zero.channel.catch_ups >= 1 and workers.one.channel.catch_ups >= 1,
        "both workers' catch-up after READY",
    )
    assert len(history_reads(fake, CHANNEL)) == 1
    assert len(history_reads(fake, SHARD_ONE_CHANNEL)) == 1


async def test_what_a_stopped_workers_shard_missed_is_answered_when_it_connects_again(
    workers: Workers, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await workers.stop_one()
    # nobody connects shard 1 now: the message reaches no worker, only the channel's history
    missed = await fake.message_create(
        channel_id=SHARD_ONE_CHANNEL,
        author_id=ALICE,
        content=f"<@{BOT_ID}> anyone there?",
        mentions=[BOT_ID],
    )
    chatter = await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="chatter")
    # shard 0's events come in order: once the later chatter is there, the missed one was not
    await eventually(lambda: int(chatter["id"]) in cached_ids(workers.zero), "the chatter")
    assert int(missed["id"]) not in cached_ids(workers.zero)
    await workers.zero.app.dispatcher.idle()
    assert fake_llm.requests == [] and fake.webhook_messages() == []

    fake_llm.script(Reply(text="Here now, sorry for the wait"))
    restarted = await workers.start_one()
    [reply] = await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the late answer")
    assert reply.json["content"] == "Here now, sorry for the wait"
    assert restarted.channel.catch_ups >= 1
    assert [identify["shard"] for identify in fake.identifies].count([1, 2]) == 2


async def test_workers_given_shard_ids_take_no_shard_lease(workers: Workers) -> None:
    assert await workers.zero.app.store.shard_leases(2) == []
    assert await workers.one.app.store.shard_leases(2) == []


# ---- shards as leases -------------------------------------------------------------------------

StartWorker: TypeAlias = Callable[..., Awaitable[DiscordGateway]]


@pytest.fixture(name="start_worker")
async def leasing_workers(
    postgres_database: str, fake: FakeDiscord, fake_llm: FakeLLM, tmp_path: Path
) -> AsyncIterator[StartWorker]:
    """Start a worker named ``name`` on the test's database with ``discord`` settings (no
    ``shard_ids``: its shards come from leases) and ``beats`` for its ``[workers]`` timing;
    every one is stopped after the test."""
    fake.add_guild(SHARD_ONE_GUILD, "Second House")
    fake.add_text_channel(SHARD_ONE_GUILD, SHARD_ONE_CHANNEL, "second")
    started: list[DiscordGateways] = []

    async def start(
        name: str, beats: dict[str, float] = QUICK_BEATS, **discord: Any
    ) -> DiscordGateway:
        gateways = DiscordGateways(fake, fake_llm, tmp_path / name)
        started.append(gateways)
        return await gateways.start(
            bind=((CHANNEL, "example"), (SHARD_ONE_CHANNEL, "example")),
            storage={"database_url": postgres_database},
            workers={"id": name, **beats},
            discord=discord,
        )

    yield start
    for gateways in reversed(started):
        await gateways.stop_all()


def connected(worker: DiscordGateway) -> list[int]:
    return worker.channel.connected_shards


async def one_each(*workers: DiscordGateway) -> None:
    """Wait until each worker connects exactly one shard."""
    await eventually(
        lambda: all(len(connected(worker)) == 1 for worker in workers),
        "one shard on each worker",
        MOVE_TIMEOUT,
    )


async def test_a_lone_worker_connects_every_shard(start_worker: StartWorker) -> None:
    alone = await start_worker("a", shards=2)
    await eventually(lambda: connected(alone) == [0, 1], "both shards", MOVE_TIMEOUT)


async def test_two_workers_hold_one_of_two_shards_each(
    start_worker: StartWorker, fake: FakeDiscord
) -> None:
    first = await start_worker("a", shards=2)
    await eventually(lambda: connected(first) == [0, 1], "both shards on a", MOVE_TIMEOUT)
    second = await start_worker("b", shards=2)
    await one_each(first, second)
    # the first keeps shard 0 (every DM): the one it lets go is its highest
    assert (connected(first), connected(second)) == ([0], [1])
    leases = await first.app.store.shard_leases(2)
    assert [(lease.shard_id, lease.worker_id) for lease in leases] == [(0, "a"), (1, "b")]
    assert [guild.id for guild in second.channel.client.guilds] == [SHARD_ONE_GUILD]
    assert fake.shard_overlaps == []


async def test_a_bot_without_a_shard_count_is_heard_by_every_worker_so_a_stop_loses_nothing(
    start_worker: StartWorker, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    first = await start_worker("a")
    second = await start_worker("b")
    await eventually(lambda: first.channel.connected and second.channel.connected, "both connected")
    assert await first.app.store.shard_leases(1) == []
    await first.app.stop()
    # no takeover to wait for: the other worker was listening all along
    fake_llm.script(Reply(text="Still here"))
    sent = await fake.dm_message(user_id=ALICE, content="is anyone there?")
    dm = fake.dm_channel_id(ALICE)
    await fake.wait_for_rest(lambda call: call.ok and call.path == f"/channels/{dm}/messages")
    assert int(sent["id"]) in cached_ids(second)


async def test_a_stopped_workers_shard_is_taken_over_and_direct_messages_are_answered_again(
    start_worker: StartWorker, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    first = await start_worker("a", shards=2)
    second = await start_worker("b", shards=2)
    await one_each(first, second)
    holder, other = (first, second) if connected(first) == [0] else (second, first)
    await holder.app.stop()  # its liveness goes with it

    await eventually(lambda: connected(other) == [0, 1], "shard 0 taken over", MOVE_TIMEOUT)
    fake_llm.script(Reply(text="Still here"))
    sent = await fake.dm_message(user_id=ALICE, content="is anyone there?")
    dm = fake.dm_channel_id(ALICE)
    await fake.wait_for_rest(lambda call: call.ok and call.path == f"/channels/{dm}/messages")
    assert int(sent["id"]) in cached_ids(other)
    assert fake.shard_overlaps == []


async def test_workers_joining_move_shards_without_two_ever_connecting_one(
    start_worker: StartWorker, fake: FakeDiscord
) -> None:
    first = await start_worker("a", shards=3)
    await eventually(lambda: connected(first) == [0, 1, 2], "every shard on a", MOVE_TIMEOUT)
    second = await start_worker("b", shards=3)
    await eventually(
        lambda: (connected(first), connected(second)) == ([0, 1], [2]),
        "a third of the shards on b",
        MOVE_TIMEOUT,
    )
    third = await start_worker("c", shards=3)
    await one_each(first, second, third)

    assert (connected(first), connected(second), connected(third)) == ([0], [2], [1])
    assert [fake.serving([shard, 3]) for shard in range(3)] == [1, 1, 1]
    moved = [identify["shard"] for identify in fake.identifies].count
    assert (moved([0, 3]), moved([1, 3]), moved([2, 3])) == (1, 2, 2)
    assert fake.shard_overlaps == []


async def test_a_shard_whose_lease_cannot_be_renewed_is_disconnected_before_it_lapses(
    start_worker: StartWorker, postgres_database: str
) -> None:
    worker = await start_worker("a", shards=2)
    await eventually(lambda: connected(worker) == [0, 1], "both shards", MOVE_TIMEOUT)
    # the database hangs for the renewals: another connection holds the lease rows locked
    hang = await asyncpg.connect(postgres_database)
    try:
        locking = hang.transaction()
        await locking.start()
        leases = await hang.fetch("SELECT expires_at FROM shard_leases FOR UPDATE")
        await eventually(lambda: connected(worker) == [], "both shards dropped", MOVE_TIMEOUT)
        now = await hang.fetchval("SELECT extract(epoch FROM clock_timestamp())")
        assert now < min(float(lease["expires_at"]) for lease in leases)  # before any lapsed
        await locking.rollback()
    finally:
        await hang.close()
    # the database answers again: the shards are taken back
    await eventually(lambda: connected(worker) == [0, 1], "both shards again", MOVE_TIMEOUT)


async def test_a_shard_let_go_while_discord_py_reconnects_it_is_closed_once_it_is_back(
    start_worker: StartWorker, fake: FakeDiscord
) -> None:
    # beats far apart: only this test changes the worker's shards meanwhile
    worker = await start_worker("a", SLOW_BEATS, shards=2)
    await eventually(lambda: connected(worker) == [0, 1], "both shards", MOVE_TIMEOUT)
    resumed = fake.resumed_count
    await fake.disconnect()  # both connections drop; discord.py resumes each by itself
    await worker.channel.connect_shards([0])

    await fake.wait_until(lambda: fake.resumed_count >= resumed + 2, MOVE_TIMEOUT, "resumes")
    await eventually(lambda: fake.serving([1, 2]) == 0, "shard 1 closed again", MOVE_TIMEOUT)
    assert fake.serving([0, 2]) == 1


async def test_a_worker_that_takes_no_share_of_the_shards_leaves_them_to_those_that_do(
    start_worker: StartWorker,
) -> None:
    alone = await start_worker("a", shards=2)
    await eventually(lambda: connected(alone) == [0, 1], "both shards", MOVE_TIMEOUT)
    store = alone.app.store
    await store.register_worker("telegram-only", "elsewhere", 1)  # live, but no Discord
    [first, _] = await store.shard_leases(2)
    await renewed_past(store, first.expires_at + 1.0)  # several beats since that worker came
    assert connected(alone) == [0, 1]


async def renewed_past(store: Store, expires_at: float) -> None:
    """Wait until shard 0 of 2 is renewed to expire after ``expires_at`` (rows: polled)."""
    async with asyncio.timeout(MOVE_TIMEOUT):
        while (await store.shard_leases(2))[0].expires_at < expires_at:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("fake", [{"allowed_privileged_intents": 0}], indirect=True)
async def test_a_worker_whose_intent_discord_refuses_says_what_to_switch_on(
    start_worker: StartWorker, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    worker = await start_worker("a", shards=1)
    await eventually(lambda: "Message Content Intent" in caplog.text, "the hint", MOVE_TIMEOUT)
    assert fake.identifies and not worker.channel.connected


async def test_what_a_shard_missed_while_no_worker_held_it_is_answered_when_it_is_back(
    start_worker: StartWorker, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    # beats far apart: only this test changes the worker's shards meanwhile
    worker = await start_worker("a", SLOW_BEATS, shards=2)
    await eventually(
        lambda: history_reads(fake, CHANNEL) and history_reads(fake, SHARD_ONE_CHANNEL),
        "both shards caught up",
        MOVE_TIMEOUT,
    )
    await worker.channel.connect_shards([0])
    await eventually(lambda: fake.serving([1, 2]) == 0, "shard 1 closed", MOVE_TIMEOUT)
    missed = await fake.message_create(
        channel_id=SHARD_ONE_CHANNEL,
        author_id=ALICE,
        content=f"<@{BOT_ID}> anyone there?",
        mentions=[BOT_ID],
    )  # nobody receives it
    reads = len(history_reads(fake, CHANNEL)), len(history_reads(fake, SHARD_ONE_CHANNEL))

    fake_llm.script(Reply(text="Back, sorry for the wait"))
    await worker.channel.connect_shards([0, 1])
    [reply] = await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the late answer")
    assert reply.json["content"] == "Back, sorry for the wait"
    assert int(missed["id"]) not in cached_ids(worker)  # it came from the history
    # only the shard that came back was caught up
    assert len(history_reads(fake, CHANNEL)) == reads[0]
    assert len(history_reads(fake, SHARD_ONE_CHANNEL)) == reads[1] + 1
