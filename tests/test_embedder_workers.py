"""The background embedder with several workers on one PostgreSQL database: it runs on the
leader only, so each message goes to the embeddings endpoint once, and a new leader takes over
the backlog; and its watermark never passes a message whose transaction commits late (ids are
taken when a row is inserted, but rows become visible when they commit)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.services.embeddings import EmbeddingsClient
from bot.store import NewMessage, Store
from bot.store.opening import open_store
from bot.workers.embedder import Embedder
from tests.conftest import Harness, HarnessFactory
from tests.fakes.fake_llm import FakeLLM
from tests.postgres_server import PostgresServer
from tests.test_recall_embeddings import client, embeddings

MODEL = "fake-embed"
WAIT_SECONDS = 15.0
FAST_HEARTBEAT = {"lease_seconds": 6, "heartbeat_seconds": 0.2}
"""A follower notices within moments that the leader is gone."""


@pytest.fixture
async def shared_database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    name = await postgres_server.create_database(template=await postgres_server.migrated_template())
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


def said(text: str, chat: str = "test:42") -> NewMessage:
    return NewMessage(chat, "user", text, f"user:{chat}", partner_id="example")


def sent(*endpoints: FakeLLM) -> list[str]:
    """Every text the endpoints were asked to embed, in the order asked."""
    return [text for llm in endpoints for body in llm.embedding_requests for text in body["input"]]


async def embedded(leader: Harness, timeout: float = WAIT_SECONDS) -> None:
    """Wake the leader's embedder (what its idle pass does for messages other workers
    stored) until every searchable message has its vector."""
    store = leader.app.store
    async with asyncio.timeout(timeout):
        while await store.embedding_backlog(MODEL) or await store.unembedded(MODEL, None, 0, 1):
            assert leader.app.embedder is not None
            leader.app.embedder.wake()
            await asyncio.sleep(0.02)


async def gateway(
    harness_factory: HarnessFactory, url: str, llm: FakeLLM, worker: str, data_dir: Path | None
) -> Harness:
    storage: dict[str, Any] = {"database_url": url}
    if data_dir is not None:
        storage["data_dir"] = str(data_dir)
    return await harness_factory(
        embeddings=embeddings(llm), storage=storage, workers={**FAST_HEARTBEAT, "id": worker}
    )


async def test_only_the_leader_embeds_and_a_new_leader_takes_over_the_backlog(
    shared_database: str, harness_factory: HarnessFactory, fake_llm: FakeLLM, tmp_path: Path
) -> None:
    """Each gateway has its own endpoint here, so what each one sent is known."""
    async with FakeLLM() as other_llm:
        first = await gateway(harness_factory, shared_database, fake_llm, "first", None)
        second = await gateway(
            harness_factory, shared_database, other_llm, "second", tmp_path / "second"
        )
        assert first.app.worker.leader is not None and second.app.worker.leader is None
        await first.app.store.add_message(said("I adopted a kitten"))
        await second.app.store.add_message(said("we went hiking", "test:43"))
        await embedded(first)
        assert sorted(sent(fake_llm, other_llm)) == ["I adopted a kitten", "we went hiking"]
        assert sent(other_llm) == []  # the follower's embedder sent nothing

        fake_llm.embeddings_down = True  # the leader cannot embed what is stored next
        await second.app.store.add_message(said("my sister moved to Lyon", "test:43"))
        await first.app.stop()  # the leader goes; the follower takes over
        async with asyncio.timeout(WAIT_SECONDS):
            while second.app.worker.leader is None:  # noqa: ASYNC110 - no event of its own
                await asyncio.sleep(0.02)
        await embedded(second)
        assert sent(other_llm) == ["my sister moved to Lyon"]


# ---- a message whose transaction commits after a later one was embedded ---------------------


@pytest.fixture
async def store(shared_database: str) -> AsyncIterator[Store]:
    opened = await open_store(shared_database)
    yield opened
    await opened.close()


@pytest.fixture
async def endpoint(fake_llm: FakeLLM) -> AsyncIterator[EmbeddingsClient]:
    embeddings_client = client(fake_llm, MODEL)
    yield embeddings_client
    await embeddings_client.close()


async def inserted(db: asyncpg.Connection, like: int, text: str, chat: str) -> int:
    """A searchable message inserted on ``db`` (in whatever transaction it has open) in
    ``chat``: a copy of message ``like`` with another text."""
    message_id = await db.fetchval(
        "INSERT INTO messages (chat_key, partner_id, role, text, audience, status, created_at,"
        " terms, scope) SELECT $3, partner_id, role, $2, audience, status, created_at,"
        " terms, scope FROM messages WHERE id = $1 RETURNING id",
        like,
        text,
        chat,
    )
    assert isinstance(message_id, int)
    return message_id


async def two_connections(url: str) -> tuple[asyncpg.Connection, asyncpg.Connection]:
    """Two connections that can insert messages at once: the search totals are kept in
    shards by server process (``pg_backend_pid() % 16``), and two inserts on one shard would
    wait for each other until the first commits."""
    first = await asyncpg.connect(url)
    for _ in range(64):
        second = await asyncpg.connect(url)
        if second.get_server_pid() % 16 != first.get_server_pid() % 16:
            return first, second
        await second.close()
    await first.close()
    raise AssertionError("no two connections on different shards")


async def drained(embedder: Embedder) -> None:
    """Run the embedder until it finds nothing to do (a bound on a broken build)."""
    for _ in range(20):
        if not await embedder.run_once():
            return
    raise AssertionError("the embedder never ran out of work")


async def test_a_message_committed_after_a_later_one_was_embedded_gets_its_vector(
    store: Store, shared_database: str, endpoint: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    embedder = Embedder(store, endpoint, 10)
    first = await store.add_message(said("the first message"))
    assert first is not None
    await drained(embedder)
    worker, leader = await two_connections(shared_database)
    try:
        late = worker.transaction()
        await late.start()
        held = await inserted(worker, first, "a reply whose turn commits late", "test:1")
        later = await inserted(leader, first, "a message stored meanwhile", "test:2")
        assert later > held  # its id is higher, its row visible first
        await drained(embedder)
        await late.commit()
    finally:
        await worker.close()
        await leader.close()
    assert await store.embedding_backlog(MODEL) == 1  # the late one is waiting, and counted
    await drained(embedder)
    assert await store.unembedded(MODEL, None, 0, 10) == []
    assert await store.embedding_backlog(MODEL) == 0
    assert sent(fake_llm).count("a reply whose turn commits late") == 1
    assert sent(fake_llm).count("a message stored meanwhile") == 1  # not sent again meanwhile


async def test_a_refused_text_is_not_sent_again_while_the_watermark_waits(
    store: Store, shared_database: str, endpoint: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    """A transaction still open keeps the watermark where it is; the texts past it that the
    endpoint refused are still not asked for again."""
    embedder = Embedder(store, endpoint, 10)
    first = await store.add_message(said("the first message"))
    assert first is not None
    await drained(embedder)
    fake_llm.embedding_max_chars = 40
    long_text = "a message far too long for this model to embed at all"
    worker, leader = await two_connections(shared_database)
    try:
        late = worker.transaction()
        await late.start()
        await inserted(worker, first, "held open", "test:1")
        await inserted(leader, first, long_text, "test:2")
        await inserted(leader, first, "  ", "test:2")
        await drained(embedder)
        await drained(embedder)
        assert await store.embedding_backlog(MODEL) == 0
        await late.rollback()
    finally:
        await worker.close()
        await leader.close()
    assert sent(fake_llm).count(long_text) == 1
