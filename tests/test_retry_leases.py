"""Refused replies across workers (docs/workers.md): two gateways on one
PostgreSQL database, the leader running the retry loop and the other worker holding the
chat's queue key and running its turns. The loop sends a refused reply only under the key's
lease: whatever the timing, the user sees every chunk once and in order; the loop leaves the
reply to the worker that holds the key, and the reply is still delivered once that worker
lets the key go.

To make the other worker run the chat's turns, the leader's only turn slot is kept busy by
another user's turn (a busy worker leaves new chats to workers with room)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.base import DeliveryError
from bot.events import Outbound
from tests.conftest import Harness, HarnessFactory, RecordingChannel, dm
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.postgres_server import PostgresServer
from tests.test_review import SLOW_HEARTBEAT
from tests.test_unfinished_replies import until

ALICE = 42
BOB = 7
KEY = f"test:{ALICE}|example"
CHUNK_CHARS = 10
FIRST = "first-1--|first-2--|first-3--|"
SECOND = "second-1-|second-2-|"
FAST_RETRIES = {"retry_minutes": 1, "first_pause_seconds": 0.05, "max_pause_seconds": 0.05}
PATIENT_MODEL = {"timeout": 120}
"""Bob's turn waits for the model for the whole test."""
WAIT_SECONDS = 15.0
LEFT_TO_THE_HOLDER = "which another worker holds"
"""What the leader's retry loop logs when it leaves a reply to the key's holder."""


class Screen:
    """What Alice sees: every chunk either worker sent to her chat, in the order sent."""

    def __init__(self) -> None:
        self.shown: list[str] = []


class WorkerChannel(RecordingChannel):
    """One worker's connection to the platform; every chunk it sends to Alice lands on the
    shared screen. Its sends to Alice can be held at a gate (the platform slow to answer)."""

    def __init__(self, name: str, screen: Screen) -> None:
        super().__init__(CHUNK_CHARS)
        self.name = name
        self.screen = screen
        self.gate = asyncio.Event()
        self.gate.set()
        self.held = asyncio.Event()
        """Set once a send to Alice waited at the closed gate."""

    async def send(self, message: Outbound) -> str | None:
        if self.fail_next:
            raise self.fail_next.pop(0)
        to_alice = message.chat.chat_id == str(ALICE)
        if to_alice and not self.gate.is_set():
            self.held.set()
            await self.gate.wait()
        sent = await super().send(message)
        if to_alice:
            self.screen.shown.append(message.text)
        return f"{self.name}-{sent}"


class Model:
    """The fake model: Bob's turn waits until the test ends; Alice's second waits for
    :attr:`second_go`."""

    def __init__(self, llm: FakeLLM) -> None:
        self.bob_asked = asyncio.Event()
        self.bob_go = asyncio.Event()
        self.second_asked = asyncio.Event()
        self.second_go = asyncio.Event()
        llm.responder = self

    async def __call__(self, body: dict[str, Any]) -> Reply:
        last = str(body["messages"][-1].get("content"))
        if "hold-on" in last:
            self.bob_asked.set()
            await self.bob_go.wait()
            return Reply(text="bob's answer")
        if "second-question" in last:
            self.second_asked.set()
            await self.second_go.wait()
            return Reply(text=SECOND)
        return Reply(text=FIRST)


@dataclass
class Pair:
    leader: Harness
    holder: Harness
    screen: Screen
    model: Model

    def channel(self, harness: Harness) -> WorkerChannel:
        assert isinstance(harness.channel, WorkerChannel)
        return harness.channel


@pytest.fixture
async def shared_database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    name = await postgres_server.create_database(template=await postgres_server.migrated_template())
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


@pytest.fixture
async def pair(
    shared_database: str,
    harness_factory: HarnessFactory,
    fake_llm: FakeLLM,
    tmp_path: Path,
) -> AsyncIterator[Pair]:
    """The leader, its one turn slot busy with Bob's turn, and the worker that then ran
    Alice's first turn, whose reply the platform refused: it waits for a retry, due at once,
    and the holder keeps Alice's key (a lease is kept idle for a heartbeat after a turn)."""
    screen = Screen()
    model = Model(fake_llm)
    leader = await harness_factory(
        channel=WorkerChannel("leader", screen),
        storage={"database_url": shared_database},
        workers={**SLOW_HEARTBEAT, "id": "leader"},
        dispatch={"max_concurrent_turns": 1},
        delivery=FAST_RETRIES,
        llm=PATIENT_MODEL,
    )
    await leader.send(dm(BOB, "hold-on"))
    await asyncio.wait_for(model.bob_asked.wait(), WAIT_SECONDS)
    holder_channel = WorkerChannel("holder", screen)
    holder_channel.fail_next.append(DeliveryError("502 Bad Gateway", retryable=True))
    holder = await harness_factory(
        channel=holder_channel,
        storage={"database_url": shared_database, "data_dir": str(tmp_path / "holder")},
        workers={**SLOW_HEARTBEAT, "id": "holder"},
        delivery=FAST_RETRIES,
        llm=PATIENT_MODEL,
    )
    await holder.send(dm(ALICE, "first-question"))
    await until(lambda: waiting(holder), "Alice's refused reply to wait for its retry")
    lease = await holder.app.store.lease(KEY)
    assert lease is not None and lease.worker_id == "holder"
    yield Pair(leader, holder, screen, model)
    model.bob_go.set()
    model.second_go.set()


async def waiting(harness: Harness) -> bool:
    return await harness.app.store.chats_with_due_retries(1e12) == [f"test:{ALICE}"]


async def settled(harness: Harness) -> bool:
    """Every reply to Alice delivered and none waiting for a retry."""
    rows = await harness.app.store.user_messages("example", f"test:{ALICE}")
    replies = [row for row in rows if row.role == "assistant"]
    return bool(replies) and all(row.status == "delivered" for row in replies)


def loop_had_its_chance(pair: Pair, caplog: pytest.LogCaptureFixture) -> Callable[[], Any]:
    """Whether the leader's retry loop has come to Alice's due reply: it either left it to
    the holder (and said so) or began sending it itself."""

    async def check() -> bool:
        left = any(LEFT_TO_THE_HOLDER in record.getMessage() for record in caplog.records)
        return left or pair.channel(pair.leader).held.is_set() or bool(pair.screen.shown)

    return check


def chunks(text: str) -> list[str]:
    return [text[i : i + CHUNK_CHARS] for i in range(0, len(text), CHUNK_CHARS)]


async def test_a_retry_due_while_another_worker_runs_the_chats_turn_is_shown_once_in_order(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bot.delivery.sender")
    pair.channel(pair.leader).gate.clear()  # whatever the leader sends to Alice is slow
    await pair.holder.send(dm(ALICE, "second-question"))
    await asyncio.wait_for(pair.model.second_asked.wait(), WAIT_SECONDS)
    await until(loop_had_its_chance(pair, caplog), "the leader's retry loop to reach Alice")
    pair.model.second_go.set()  # the holder's turn sends the waiting reply, then its own
    await until(lambda: settled(pair.holder), "both replies delivered")
    await asyncio.wait_for(pair.holder.app.dispatcher.idle(), WAIT_SECONDS)
    pair.channel(pair.leader).gate.set()
    await pair.leader.app.delivery.stop(WAIT_SECONDS)  # a retry under way finishes first
    assert pair.screen.shown == chunks(FIRST) + chunks(SECOND)
    assert pair.channel(pair.leader).texts(str(ALICE)) == []


async def test_the_retry_loop_leaves_the_reply_to_the_keys_holder_and_it_is_still_delivered(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bot.delivery.sender")
    await until(loop_had_its_chance(pair, caplog), "the leader's retry loop to reach Alice")
    assert pair.screen.shown == []  # the holder keeps the key: the loop left the reply alone
    await pair.holder.app.stop()  # the holder lets its keys go
    await until(lambda: settled(pair.leader), "the reply delivered by the leader's retry")
    assert pair.screen.shown == chunks(FIRST)
    assert pair.channel(pair.leader).texts(str(ALICE)) == chunks(FIRST)
    assert await pair.leader.app.store.chats_with_due_retries(1e12) == []


async def test_a_reply_refused_on_a_worker_that_does_not_lead_is_retried_by_the_leader(
    pair: Pair,
) -> None:
    """The leader's loop hears nothing when another worker schedules a retry: it looks for
    due retries at least every ``delivery.first_pause_seconds``."""
    await pair.holder.app.stop()
    await until(lambda: settled(pair.leader), "the reply delivered by the leader's retry")
    assert pair.screen.shown == chunks(FIRST)
