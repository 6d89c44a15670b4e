"""Telegram's long poll across changes of leadership (adapters/telegram_receiving.py,
adapters/telegram_poll_client.py, bot/workers/leadership.py, bot/workers/worker.py;
docs/architecture.md "Several workers"): a worker may lose and regain the leadership any number of
times, and each regain polls again from a fresh client, however the getUpdates in flight was cut
off; a leader that cannot poll gives the leadership up to another worker. The gateways run the real
python-telegram-bot against the fake Bot API; several of them share one PostgreSQL database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.fakes.fake_telegram import FakeTelegram
from tests.postgres_server import PostgresServer
from tests.telegram_harness import (
    BOT_USERNAME,
    Gateway,
    TelegramGateways,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)

ALICE = 501
SWEEP_TURNS = 40
"""How many turns of the event loop the step-down is moved across: a getUpdates connects
(and is cut off while it does) within its first dozen turns or so on 127.0.0.1."""
RESUME_SECONDS = 10.0
"""A bound for hearing Telegram again after a regain: a few poll timeouts (1 s here) and a
few heartbeats, far less than the backoff of a poller that is failing for good."""
FLAPS = 20
LEASE_SECONDS = 2.0
WORKERS = {"lease_seconds": LEASE_SECONDS, "heartbeat_seconds": 0.5}
WAIT_SECONDS = 15.0
LEADER_ROW = "gateway"


async def loop_turns(count: int) -> None:
    """Let the event loop run ``count`` times: the step-down then lands at that point of the
    getUpdates just started (a fixed moment in the request's life, not a span of time)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def test_a_regained_leadership_hears_telegram_whenever_the_last_poll_was_cut_off(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    """Leadership lost and regained over and over, each loss cutting the getUpdates just
    started at a later moment of its start (connecting included): after the last regain
    the poller hears a new message within a few poll timeouts."""
    gateway = await gateways.start()
    channel = gateway.channel
    await fake.wait_for_pending_polls()
    for turns in range(SWEEP_TURNS):
        await channel.follow()  # the leadership lost (what LeaderDuties.follow does)
        await channel.lead()  # and regained: a getUpdates starts
        await loop_turns(turns)
    await channel.follow()
    await channel.lead()
    fake.send_user_message(chat_id=ALICE, text="/help", first_name="Alice")
    await fake.wait_for_sent(chat_id=ALICE, timeout=RESUME_SECONDS)


# ---- several workers on one PostgreSQL database -----------------------------------------


@pytest.fixture
async def shared_database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    name = await postgres_server.create_database(template=await postgres_server.migrated_template())
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


async def worker(
    gateways: TelegramGateways, url: str, name: str, data_dir: Path, **sections: dict[str, Any]
) -> Gateway:
    """A gateway on the shared database as worker ``name``, with a data directory of its own."""
    return await gateways.start(
        storage={"database_url": url, "data_dir": str(data_dir)},
        workers={**WORKERS, "id": name},
        **sections,
    )


async def until(condition: Callable[[], object], what: str) -> None:
    """Poll a worker's leadership (state with no event of its own) until ``condition()``,
    or fail naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_SECONDS
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {WAIT_SECONDS:g}s waiting for {what}")
        await asyncio.sleep(0.01)


async def hand_leadership_to(db: asyncpg.Connection, worker_id: str) -> None:
    """What the database holds once another worker took over a leadership whose holder was
    paused past its lease (a VM freeze, a long GC): that worker's id under a new epoch."""
    await db.execute(
        "UPDATE leader SET worker_id = $1, epoch = epoch + 1,"
        " expires_at = extract(epoch FROM clock_timestamp()) + $2 WHERE name = $3",
        worker_id,
        LEASE_SECONDS,
        LEADER_ROW,
    )


class Stream:
    """A steady stream of messages: each is pushed once the one before it was stored (the
    gateway confirms an update to Telegram only then), and how long each took is kept."""

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake
        self.texts: list[str] = []
        self.waits: list[float] = []
        self.stored = asyncio.Condition()
        self.stopping = False

    async def run(self) -> None:
        """Until :attr:`stopping`, once the message under way was stored."""
        loop = asyncio.get_running_loop()
        while not self.stopping:
            text = f"message {len(self.texts)}"
            update = self.fake.send_user_message(chat_id=ALICE, text=text, first_name="Alice")
            pushed = loop.time()
            await self.fake.wait_until(
                lambda update=update: update not in self.fake.pending_updates,
                WAIT_SECONDS,
                f"{text!r} to be stored and confirmed",
            )
            self.waits.append(loop.time() - pushed)
            self.texts.append(text)
            async with self.stored:
                self.stored.notify_all()

    async def more(self, count: int) -> None:
        """Wait until ``count`` more messages were stored."""
        target = len(self.texts) + count
        async with self.stored:
            await asyncio.wait_for(
                self.stored.wait_for(lambda: len(self.texts) >= target), WAIT_SECONDS
            )


async def stored_user_texts(url: str) -> list[str]:
    db = await asyncpg.connect(url)
    try:
        rows = await db.fetch("SELECT text FROM messages WHERE role = 'user' ORDER BY id")
    finally:
        await db.close()
    return [row["text"] for row in rows]


async def test_leadership_flapping_twenty_times_loses_and_doubles_no_message(
    shared_database: str, gateways: TelegramGateways, fake: FakeTelegram, tmp_path: Path
) -> None:
    """Two workers; the leadership goes from one to the other and back, 20 times, while
    messages keep coming: every message is stored exactly once, and none waits longer than a
    few poll timeouts across a change of leader."""
    first = await worker(gateways, shared_database, "first", tmp_path / "first")
    second = await worker(gateways, shared_database, "second", tmp_path / "second")
    stream = Stream(fake)
    flowing = asyncio.create_task(stream.run())
    db = await asyncpg.connect(shared_database)
    try:
        await stream.more(2)
        for flap in range(FLAPS):
            old, new = (first, second) if flap % 2 == 0 else (second, first)
            await hand_leadership_to(db, new.app.worker.id)
            await until(
                lambda old=old, new=new: new.app.worker.leader and not old.app.worker.leader,
                f"flap {flap}: the leadership moved to {new.app.worker.id}",
            )
            await stream.more(2)  # polled by the new leader
        stream.stopping = True
        await asyncio.wait_for(flowing, WAIT_SECONDS)
    finally:
        await db.close()
        flowing.cancel()
        await asyncio.gather(flowing, return_exceptions=True)
    assert max(stream.waits) < RESUME_SECONDS, stream.waits
    stored = await stored_user_texts(shared_database)
    assert sorted(stored) == sorted(stream.texts)  # each once, none lost


async def test_a_leader_that_cannot_poll_gives_the_leadership_to_another_worker(
    shared_database: str,
    gateways: TelegramGateways,
    fake: FakeTelegram,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first worker's Bot API answers every getUpdates with 502 (a broken proxy in front
    of it): after ``leader.give_up_seconds`` it gives the leadership up, says so once, and
    the second worker takes it over and hears Telegram."""
    caplog.set_level(logging.WARNING, logger="bot.workers.worker")
    leader = {"give_up_seconds": 1}
    async with FakeTelegram(bot_username=BOT_USERNAME, can_read_all_group_messages=True) as broken:
        first = await worker(
            gateways, shared_database, "first", tmp_path / "first",
            telegram={"base_url": broken.base_url}, leader=leader,
        )  # fmt: skip
        second = await worker(gateways, shared_database, "second", tmp_path / "second")
        assert first.app.worker.leader is not None
        broken.fail_next("getUpdates", status=502, count=1_000_000)
        await until(lambda: second.app.worker.leader, "the second worker leading")
        fake.send_user_message(chat_id=ALICE, text="/help", first_name="Alice")
        await fake.wait_for_sent(chat_id=ALICE, timeout=RESUME_SECONDS)
        assert first.app.worker.leader is None
        await gateways.stop_all()  # while the broken Bot API still answers the first one
    given_up = [r for r in caplog.records if "gives the leadership up" in r.getMessage()]
    assert len(given_up) == 1, [r.getMessage() for r in given_up]
    assert "first" in given_up[0].getMessage() and "Bad Gateway" in given_up[0].getMessage()
