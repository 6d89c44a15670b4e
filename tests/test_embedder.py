"""The background embedder's backlog: a new searchable message is embedded as soon as it is
stored (the store wakes the embedder; no idle round to wait for), and the backlog holds only
messages that search can find, so nothing unsearchable keeps the embedder busy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from bot.services.embeddings import EmbeddingsClient
from bot.store import NewMessage, Store
from bot.workers.embedder import Embedder
from tests.conftest import StoreBackend
from tests.fakes.fake_llm import FakeLLM
from tests.store_support import execute
from tests.test_recall_embeddings import client

MODEL = "fake-embed"
NEVER_SECONDS = 3600.0
"""An idle round or back-off that no test outlives: only a wake-up moves the embedder."""


@pytest.fixture
async def embeddings(fake_llm: FakeLLM) -> AsyncIterator[EmbeddingsClient]:
    embeddings = client(fake_llm, MODEL)
    try:
        yield embeddings
    finally:
        await embeddings.close()


def said(text: str, role: str = "user") -> NewMessage:
    return NewMessage("test:42", role, text, "user:test:42", partner_id="example")


async def idle(embedder: Embedder, timeout: float = 10.0) -> None:
    """Wait until the embedder waits for new messages (a bound on a broken build)."""
    async with asyncio.timeout(timeout):
        while True:
            if embedder.idle:
                return
            await asyncio.sleep(0.01)


async def test_a_stored_message_wakes_the_idle_embedder(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    embedder = Embedder(store, embeddings, 10, idle_seconds=NEVER_SECONDS)
    embedder.start()
    try:
        await idle(embedder)  # nothing to do: it waits for new messages
        await store.add_message(said("I adopted a kitten"))
        await fake_llm.wait_for_embeddings(1)
        await idle(embedder)
        assert await store.embedding_backlog(MODEL) == 0
        assert fake_llm.embedding_requests[0]["input"] == ["I adopted a kitten"]
    finally:
        await embedder.stop()


async def test_a_message_search_cannot_find_is_not_in_the_backlog(
    store: Store, embeddings: EmbeddingsClient
) -> None:
    await store.add_message(said("partner_search: kitten", role="tool"))
    assert await store.embedding_backlog(MODEL) == 0
    assert await Embedder(store, embeddings, 10).run_once() == 0


async def test_a_message_no_longer_searchable_leaves_the_backlog(
    store: Store, store_backend: StoreBackend, embeddings: EmbeddingsClient
) -> None:
    message_id = await store.add_message(said("(voice note)"))
    embedder = Embedder(store, embeddings, 10)
    assert await embedder.run_once() == 1
    assert message_id is not None
    await store.set_message_text(message_id, "I adopted a kitten")
    assert await store.embedding_backlog(MODEL) == 1  # its new text waits for a vector
    # the row stays but is out of the index (what a message search may no longer find is)
    await execute(store_backend, "UPDATE messages SET terms = NULL WHERE id = ?", message_id)
    assert await store.embedding_backlog(MODEL) == 0
    assert await embedder.run_once() == 0
