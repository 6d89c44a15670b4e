"""The background embedder with several workers on one PostgreSQL database: it runs on the
leader only, so each message goes to the embeddings endpoint once, and a new leader takes over
the backlog."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.store import NewMessage
from tests.conftest import Harness, HarnessFactory
from tests.fakes.fake_llm import FakeLLM
from tests.postgres_server import PostgresServer
from tests.test_recall_embeddings import embeddings

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
