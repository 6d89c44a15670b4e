"""Reviews claimed and fenced across workers (docs/architecture.md "Several workers"): a review
runs under a claim on its session, one at a time across every worker on the database; a
review whose claim was taken over writes neither memory nor its watermark; a claim whose
worker died lapses and any worker's heartbeat sweep takes it and runs the review; the
leader's scheduled sweep only marks reviews due.

The store's side runs on both backends (the ``store`` fixture); two gateways on one database
need PostgreSQL (SQLite's data directory is one process's)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.store import LeaseLost, NewMessage, SessionRow, Store, review_key, reviewed_session
from partners.memory import MemoryFile
from tests.conftest import Harness, HarnessFactory
from tests.fakes.fake_llm import Reply
from tests.postgres_server import PostgresServer
from tests.test_review import REVIEW_ON, SLOW_HEARTBEAT, review_reply

LEASE_SECONDS = 60.0
WAIT_SECONDS = 15.0
STORY = "My sister Ana moved to Montreal last spring"
"""What every test's user said: long enough to be reviewed."""


# ---- the store, on both backends ----------------------------------------------------------


async def due_session(store: Store, chat: str = "test:1", due_at: float = 100.0) -> SessionRow:
    session = await store.create_session(
        partner_id="mira", chat_key=chat, user_key=chat, audience=f"user:{chat}",
        system_prompt="",
    )  # fmt: skip
    await store.add_message(
        NewMessage(
            chat_key=chat,
            role="user",
            text=STORY,
            audience=f"user:{chat}",
            dedup_key=f"{chat}:1",
            session_id=session.id,
            partner_id="mira",
        )
    )
    await store.mark_review_due(session.id, due_at)
    return session


async def test_a_review_is_claimed_by_one_worker_at_a_time(store: Store) -> None:
    session = await due_session(store)
    claim = await store.claim_review("w1", session.id, LEASE_SECONDS)
    assert claim is not None and reviewed_session(claim) == session.id
    assert claim.queue_key == review_key(session.id) and claim.worker_id == "w1"
    assert await store.claim_review("w2", session.id, LEASE_SECONDS) is None
    assert await store.claim_review("w1", session.id, LEASE_SECONDS) is None  # its own too
    assert await store.claim_due_reviews("w2", LEASE_SECONDS, 200.0, 10) == []


async def test_due_reviews_are_claimed_once_the_longest_due_first(store: Store) -> None:
    later = await due_session(store, "test:1", due_at=150.0)
    first = await due_session(store, "test:2", due_at=100.0)
    await due_session(store, "test:3", due_at=500.0)  # not due yet
    [claim] = await store.claim_due_reviews("w1", LEASE_SECONDS, 200.0, 1)
    assert reviewed_session(claim) == first.id
    [then] = await store.claim_due_reviews("w1", LEASE_SECONDS, 200.0, 10)
    assert reviewed_session(then) == later.id
    assert await store.claim_due_reviews("w2", LEASE_SECONDS, 200.0, 10) == []
    await store.release_leases([claim])
    [again] = await store.claim_due_reviews("w2", LEASE_SECONDS, 200.0, 10)
    assert reviewed_session(again) == first.id and again.epoch > claim.epoch


async def test_two_sweeps_at_once_never_claim_one_review_twice(store: Store) -> None:
    for number in range(6):
        await due_session(store, f"test:{number}")
    swept = await asyncio.gather(
        *(store.claim_due_reviews(f"w{n}", LEASE_SECONDS, 200.0, 4) for n in range(3))
    )
    keys = [claim.queue_key for claims in swept for claim in claims]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 6


async def test_a_dead_workers_lapsed_claim_is_taken_over_with_a_new_epoch(store: Store) -> None:
    session = await due_session(store)
    dead = await store.claim_review("dead", session.id, 0)  # lapsed by the next statement
    assert dead is not None
    [taken] = await store.claim_due_reviews("w2", LEASE_SECONDS, 200.0, 10)
    assert taken.worker_id == "w2" and taken.epoch == dead.epoch + 1


async def test_the_heartbeat_renews_a_review_claim(store: Store) -> None:
    session = await due_session(store)
    await store.register_worker("w1", "host", 1)
    claim = await store.claim_review("w1", session.id, 0)
    assert claim is not None
    await store.heartbeat("w1", LEASE_SECONDS, [claim])  # the worker knows its claim
    assert await store.claim_due_reviews("w2", LEASE_SECONDS, 200.0, 10) == []


async def test_a_lost_claim_advances_no_watermark_and_counts_no_failure(store: Store) -> None:
    session = await due_session(store)
    stale = await store.claim_review("w1", session.id, 0)
    assert stale is not None
    fresh = await store.claim_review("w2", session.id, LEASE_SECONDS)
    assert fresh is not None
    with pytest.raises(LeaseLost):
        await store.review_succeeded(session.id, 99, stale)
    with pytest.raises(LeaseLost):
        await store.review_failed(session.id, "late", 300.0, stale)
    untouched = await store.session(session.id)
    assert untouched is not None
    assert (untouched.reviewed_upto, untouched.review_attempts) == (0, 0)
    assert untouched.review_due_at == 100.0
    assert await store.review_failed(session.id, "timeout", 300.0, fresh) == 1
    await store.review_succeeded(session.id, 99, fresh)
    done = await store.session(session.id)
    assert done is not None and done.reviewed_upto == 99 and done.review_due_at is None


# ---- gateways ------------------------------------------------------------------------------


async def reviewing_gateway(
    harness_factory: HarnessFactory, storage: dict[str, Any], worker: str = "first"
) -> Harness:
    """A gateway whose worker, named ``worker``, beats at its start and not again within a
    test (the test sweeps itself)."""
    workers = {**SLOW_HEARTBEAT, "id": worker}
    return await harness_factory(memory=REVIEW_ON, workers=workers, storage=storage)


async def talked(harness: Harness) -> SessionRow:
    """A conversation of user 42 with the example partner, stored as a turn leaves it (with
    two gateways either may run a turn, so none is run)."""
    store = harness.app.store
    session = await store.create_session(
        partner_id="example", chat_key="test:42", user_key="test:42", audience="user:test:42",
        system_prompt="",
    )  # fmt: skip
    for number, (role, text) in enumerate((("user", STORY), ("assistant", "how lovely"))):
        await store.add_message(
            NewMessage(
                chat_key="test:42",
                role=role,
                text=text,
                audience="user:test:42",
                dedup_key=f"talked:{number}",
                session_id=session.id,
                partner_id="example",
            )
        )
    return session


def user_file(harness: Harness) -> MemoryFile:
    return MemoryFile(harness.app.catalog.require("example").dir, "users/test-42.md")


async def facts(harness: Harness) -> list[str]:
    return [entry.text for entry in await harness.app.memory.entries(user_file(harness))]


class HeldReviews:
    """The fake LLM's responder: review requests wait until :meth:`release`."""

    def __init__(self) -> None:
        self.requests = 0
        self.arrived = asyncio.Event()
        self.released = asyncio.Event()

    async def __call__(self, body: dict[str, Any]) -> Reply:
        assert body.get("response_format"), "only reviews call the model here"
        self.requests += 1
        self.arrived.set()
        await self.released.wait()
        return review_reply(
            {"summary": "Ana moved"},
            [{"file": "users/test-42.md", "op": "add", "text": "Sister Ana lives in Montreal"}],
        )

    def release(self) -> None:
        self.released.set()


@pytest.fixture
async def shared_database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    name = await postgres_server.create_database(template=await postgres_server.migrated_template())
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


async def two_workers(
    harness_factory: HarnessFactory, url: str, tmp_path: Path
) -> tuple[Harness, Harness]:
    """Two gateways on one PostgreSQL database, each with its own data directory; the first
    leads."""
    first = await reviewing_gateway(harness_factory, {"database_url": url})
    second = await reviewing_gateway(
        harness_factory, {"database_url": url, "data_dir": str(tmp_path / "second")}, "second"
    )
    return first, second


async def test_two_workers_never_run_one_sessions_review_at_once(
    shared_database: str, harness_factory: HarnessFactory, tmp_path: Path
) -> None:
    first, second = await two_workers(harness_factory, shared_database, tmp_path)
    assert first.app.worker.id != second.app.worker.id
    session = await talked(first)
    held = HeldReviews()
    first.llm.responder = held
    running = asyncio.create_task(first.app.reviewer.review(session.id))
    await asyncio.wait_for(held.arrived.wait(), WAIT_SECONDS)
    other = asyncio.create_task(second.app.reviewer.review(session.id))
    async with asyncio.timeout(WAIT_SECONDS):
        while not other.done() and held.requests < 2:  # noqa: ASYNC110 - the model's count
            await asyncio.sleep(0.01)
    held.release()
    results = await asyncio.wait_for(asyncio.gather(running, other), WAIT_SECONDS)
    assert held.requests == 1, [r.note for r in results]
    assert results[1].note == "another review of this session is running"
    assert await facts(first) == ["Sister Ana lives in Montreal"]


async def test_a_review_whose_claim_was_taken_over_writes_nothing(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory
) -> None:
    """The worker is taken for dead while the model answers (its leases let go, another
    worker claims the review): the answer it gets is written nowhere."""
    harness = await reviewing_gateway(harness_factory, storage_on_each_backend)
    session = await talked(harness)
    held = HeldReviews()
    harness.llm.responder = held
    review = asyncio.create_task(harness.app.reviewer.review(session.id))
    await asyncio.wait_for(held.arrived.wait(), WAIT_SECONDS)
    store = harness.app.store
    await store.leave(harness.app.worker.id)
    assert await store.claim_review("another-worker", session.id, LEASE_SECONDS) is not None
    held.release()
    result = await asyncio.wait_for(review, WAIT_SECONDS)
    assert result.note == "another worker took this review over"
    after = await store.session(session.id)
    assert after is not None and after.reviewed_upto == 0 and after.review_attempts == 0
    assert await facts(harness) == []
    assert not list((harness.app.catalog.require("example").dir / "memory").glob("*.md"))


async def test_a_review_a_dead_worker_claimed_is_taken_by_the_sweep_and_runs(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory
) -> None:
    harness = await reviewing_gateway(harness_factory, storage_on_each_backend)
    session = await talked(harness)
    store = harness.app.store
    await store.mark_review_due(session.id, 0)
    assert await store.claim_review("alive-elsewhere", session.id, LEASE_SECONDS) is not None
    assert await harness.app.reviewer.sweep() == 0  # a live claim: another worker runs it
    await store.leave("alive-elsewhere")
    assert await store.claim_review("died", session.id, 0) is not None  # and lapsed
    harness.llm.script(
        review_reply(
            {"summary": "Ana moved"},
            [{"file": "users/test-42.md", "op": "add", "text": "Sister Ana lives in Montreal"}],
        )
    )
    assert await harness.app.reviewer.sweep() == 1
    await asyncio.wait_for(harness.app.reviewer.idle(), WAIT_SECONDS)
    after = await store.session(session.id)
    assert after is not None and after.reviewed_upto > 0 and after.review_due_at is None
    assert await facts(harness) == ["Sister Ana lives in Montreal"]


async def test_the_leaders_sweep_enqueues_and_a_worker_that_does_not_lead_runs_it(
    shared_database: str, harness_factory: HarnessFactory, tmp_path: Path
) -> None:
    leader, follower = await two_workers(harness_factory, shared_database, tmp_path)
    assert leader.app.worker.leader is not None and follower.app.worker.leader is None
    session = await talked(leader)
    idle_later = time.time() + 2 * 3600  # past idle_review_minutes
    leader.app.reviewer.clock = follower.app.reviewer.clock = lambda: idle_later
    requests = len(leader.llm.requests)
    await leader.app.scheduler.sweep()
    assert len(leader.llm.requests) == requests  # the leader ran no review
    due = await leader.app.store.session(session.id)
    assert due is not None and due.review_due_at == idle_later
    leader.llm.script(
        review_reply(
            {"summary": "Ana moved"},
            [{"file": "users/test-42.md", "op": "add", "text": "Sister Ana lives in Montreal"}],
        )
    )
    assert await follower.app.reviewer.sweep() == 1
    await asyncio.wait_for(follower.app.reviewer.idle(), WAIT_SECONDS)
    assert len(leader.llm.requests) == requests + 1
    assert await facts(follower) == ["Sister Ana lives in Montreal"]
