"""A database outage under a running worker is one episode for each loop that meets it: the loop's
first failure is logged with its traceback, the failures after it only at DEBUG, and one line says
when the loop recovered (docs/architecture.md: a fault is logged once per episode, not once per
attempt). The session's throwaway PostgreSQL server is really stopped under the gateway, and
started again once every loop has failed at least twice."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from bot.workers.scheduler import Scheduler
from tests.conftest import Harness, HarnessFactory, dm
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.postgres_server import PostgresServer
from tests.test_recall_embeddings import embeddings
from tests.test_workers import until

LOOPS = {
    "the heartbeat": "bot.workers.worker",
    "the dispatcher": "bot.workers.dispatcher",
    "delivery retries": "bot.delivery.retries",
    "embedding": "bot.workers.embedder",
    "pairing approvals": "bot.app.lifecycle",
    "the partner catalog": "bot.app.lifecycle",
    "review sweep": "bot.workers.scheduler",
}
"""Each loop that meets the outage here, and the logger it writes to."""
FAST = {
    # beats every 0.2 s, and leads through the outage (a lapsed leadership stops the
    # leader's loops, which then fail no more)
    "workers": {"heartbeat_seconds": 0.2, "lease_seconds": 60},
    "delivery": {"first_pause_seconds": 0.2, "max_pause_seconds": 0.4},
}


def records(caplog: pytest.LogCaptureFixture, logger: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger]


def failures(caplog: pytest.LogCaptureFixture, loop: str) -> int:
    return sum(
        loop in r.getMessage() and "failed" in r.getMessage() for r in records(caplog, LOOPS[loop])
    )


def tracebacks(caplog: pytest.LogCaptureFixture, logger: str) -> int:
    return sum(r.exc_info is not None for r in records(caplog, logger))


def loop_tracebacks(caplog: pytest.LogCaptureFixture, loop: str) -> int:
    return sum(
        r.exc_info is not None and loop in r.getMessage() for r in records(caplog, LOOPS[loop])
    )


def recoveries(caplog: pytest.LogCaptureFixture, loop: str) -> list[str]:
    return [
        r.getMessage()
        for r in records(caplog, LOOPS[loop])
        if loop in r.getMessage() and "recovered after" in r.getMessage()
    ]


def scheduler(harness: Harness) -> Scheduler:
    return harness.app.leader_duties.scheduler


def every_loop(harness: Harness, holds: Callable[[str], bool]) -> Callable[[], bool]:
    """A condition for :func:`until`; each poll also gives the loops that wait for a reason
    one: the embedder a wake-up, the scheduler's job a run (as APScheduler would)."""
    pending: set[asyncio.Task[Any]] = set()

    def check() -> bool:
        assert harness.app.embedder is not None
        harness.app.embedder.wake()
        if not pending:
            job = asyncio.ensure_future(scheduler(harness).sweep())
            pending.add(job)
            job.add_done_callback(pending.discard)
        return all(holds(loop) for loop in LOOPS)

    return check


async def test_a_database_outage_is_one_traceback_and_one_recovery_per_loop(
    postgres_database: str,
    postgres_server: PostgresServer,
    harness_factory: HarnessFactory,
    fake_llm: FakeLLM,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="bot")
    harness = await harness_factory(
        storage={"database_url": postgres_database}, embeddings=embeddings(fake_llm), **FAST
    )
    answer = asyncio.Event()

    async def held(_body: dict[str, Any]) -> Reply:
        await answer.wait()
        return Reply(text="hello")

    fake_llm.responder = held
    await harness.send(dm(42, "hi"))
    await fake_llm.wait_for_requests(1)  # a turn is in flight when the database goes away
    caplog.clear()
    await asyncio.to_thread(postgres_server.stop_serving)
    try:
        answer.set()
        await until(
            every_loop(harness, lambda loop: failures(caplog, loop) >= 2),
            "every loop to fail twice",
        )
    finally:
        await asyncio.to_thread(postgres_server.start_serving)
    await until(
        every_loop(harness, lambda loop: bool(recoveries(caplog, loop))), "every loop to recover"
    )
    for loop in LOOPS:
        assert loop_tracebacks(caplog, loop) == 1, loop
        assert len(recoveries(caplog, loop)) == 1, loop
    # and anything else of ours (the turn in flight) logged the outage once at most
    others = Counter(
        r.name
        for r in caplog.records
        if r.name.startswith(("bot.", "partners."))
        and r.exc_info is not None
        and not any(loop in r.getMessage() for loop in LOOPS)
    )
    assert {name: count for name, count in others.items() if count > 1} == {}
    # the driver's pool keeps no connection floor that it would restore, and log, on its own
    assert tracebacks(caplog, "asyncpg.pool") == 0
