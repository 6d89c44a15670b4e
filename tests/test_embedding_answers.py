"""What the embeddings endpoint answers is checked where it comes in
(:mod:`bot.services.embeddings`).

A vector that is no vector (NaN, infinity, strings, nested lists, another size than the
others) costs its own message its vector and nothing more: the embedder stores the rest of the
batch, goes on with the next one and does not ask for that message again. An answer that is
wrong as a whole (strings for every text, a vector missing, no list at all) is the endpoint's
failure: search answers lexically, and the embedder tries again after its shortest pause,
having skipped nothing."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.services.embeddings import EmbeddingsClient
from bot.store import NewMessage, Store
from bot.workers.embedder import Embedder
from partners.recall import Recall
from tests.fakes.fake_llm import EMBEDDING_DIMENSIONS, FakeLLM, fake_embedding
from tests.test_recall_embeddings import client
from tests.test_workers import until

MODEL = "fake-embed"
AUDIENCE = "user:test:42"
TEXTS = (
    "I adopted a kitten",
    "my sister moved to Lyon",
    "we went hiking in the rain",
    "the train was late again",
    "pancakes on sunday",
)
BAD = TEXTS[1]
"""Message 2 of 5: the one the endpoint answers badly for."""
NEVER_SECONDS = 3600.0


def _good(text: str = BAD) -> list[float]:
    return fake_embedding(text, MODEL)


BAD_VECTORS: dict[str, Any] = {
    "one NaN": [*_good()[:-1], math.nan],
    "infinity": [math.inf, *_good()[1:]],
    "strings": ["a"] * EMBEDDING_DIMENSIONS,
    "numbers written as strings": [str(x) for x in _good()],
    "nested lists": [[1.0, 2.0], [3.0]],
    "a matrix": [_good(), _good()],
    "another size": [1.0, 0.0, 0.0],
    "a base64 string": "AACAPwAAAEA=",
    "null": None,
    "an empty list": [],
    "all zeros": [0.0] * EMBEDDING_DIMENSIONS,
    "a number": 1.5,
    "an object": {"values": [1.0]},
}
"""What an endpoint may answer for one text instead of a vector. (JSON's true is not among
them: the openai client turns it into 1.0 before the gateway sees it.)"""


def _each(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    """A rewrite of the answer that changes each of its ``data`` items."""
    return lambda body: {**body, "data": [change(item) for item in body["data"]]}


WHOLLY_BAD: dict[str, Callable[[dict[str, Any]], Any]] = {
    "strings for every text": _each(lambda i: {**i, "embedding": "x" * 12}),
    "NaN for every text": _each(lambda i: {**i, "embedding": [math.nan] * EMBEDDING_DIMENSIONS}),
    "a vector missing": lambda body: {**body, "data": body["data"][:-1]},
    "a vector too many": lambda body: {**body, "data": [*body["data"], body["data"][0]]},
    "an index twice": _each(lambda i: {**i, "index": 0}),
    "an index that is no number": _each(lambda i: {**i, "index": "first"}),
    "data that is no list": lambda body: {**body, "data": "no vectors today"},
    "data items that are numbers": lambda body: {**body, "data": [1] * len(body["data"])},
    "items without an embedding": _each(lambda i: {"index": i["index"]}),
    "no data at all": lambda body: {"object": body["object"]},
    "a list instead of an object": lambda body: [body],
    "a body that is no JSON": lambda _: b'{"data": [',
    "JSON nested past the parser's depth": lambda _: b"[" * 100_000 + b"]" * 100_000,
}
"""Answers that are wrong as a whole: the endpoint, not one message, is at fault."""


@pytest.fixture
async def embeddings(fake_llm: FakeLLM) -> AsyncIterator[EmbeddingsClient]:
    embeddings = client(fake_llm, MODEL)
    try:
        yield embeddings
    finally:
        await embeddings.close()


async def five_messages(store: Store) -> list[int]:
    ids = []
    for text in TEXTS:
        message_id = await store.add_message(
            NewMessage("test:42", "user", text, AUDIENCE, partner_id="example")
        )
        assert message_id is not None
        ids.append(message_id)
    return ids


async def embed_everything(embedder: Embedder, most_batches: int = 20) -> None:
    """Run batches until none is waiting (a bound on a broken build)."""
    for _ in range(most_batches):
        if not await embedder.run_once():
            return
    raise AssertionError("the backlog never emptied")


async def embedded_ids(store: Store, ids: list[int]) -> set[int]:
    rows = await store.stored_vectors("example", MODEL, EMBEDDING_DIMENSIONS)
    return {row.message_id for row in rows} & set(ids)


async def emptied(store: Store, timeout: float = 10.0) -> None:
    """Wait until no message waits for a vector (a bound on a broken build)."""
    async with asyncio.timeout(timeout):
        while True:
            if not await store.embedding_backlog(MODEL):
                return
            await asyncio.sleep(0.01)


# ---- one bad vector ------------------------------------------------------------------------


@pytest.mark.parametrize("answer", BAD_VECTORS.values(), ids=BAD_VECTORS.keys())
async def test_a_bad_vector_for_one_message_leaves_the_messages_after_it_embedded(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM, answer: Any
) -> None:
    ids = await five_messages(store)
    fake_llm.embedding_answers[BAD] = answer
    await embed_everything(Embedder(store, embeddings, batch_size=2))
    assert await embedded_ids(store, ids) == {ids[0], *ids[2:]}
    assert await store.embedding_backlog(MODEL) == 0


async def test_a_message_whose_vector_was_bad_is_not_asked_for_again(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    await five_messages(store)
    fake_llm.embedding_answers[BAD] = BAD_VECTORS["one NaN"]
    embedder = Embedder(store, embeddings, batch_size=2)
    await embed_everything(embedder)
    asked = len(fake_llm.embedding_requests)
    assert await embedder.run_once() == 0
    assert len(fake_llm.embedding_requests) == asked


async def test_a_bad_vector_alone_in_its_batch_is_skipped(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    ids = await five_messages(store)
    fake_llm.embedding_answers[BAD] = BAD_VECTORS["one NaN"]
    embedder = Embedder(store, embeddings, batch_size=1)
    await embed_everything(embedder)
    assert await embedded_ids(store, ids) == {ids[0], *ids[2:]}
    assert embedder.failures == 0


async def test_a_vector_of_another_size_than_the_earlier_ones_is_skipped(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    """Alone in its batch there is nothing to compare it with but what came before."""
    ids = await five_messages(store)
    fake_llm.embedding_answers[BAD] = BAD_VECTORS["another size"]
    await embed_everything(Embedder(store, embeddings, batch_size=1))
    assert await embedded_ids(store, ids) == {ids[0], *ids[2:]}
    assert await store.stored_vectors("example", MODEL, 3) == []


# ---- a wholly bad answer -------------------------------------------------------------------


@pytest.mark.parametrize("rewrite", WHOLLY_BAD.values(), ids=WHOLLY_BAD.keys())
async def test_a_wholly_bad_answer_pauses_the_embedder_briefly_and_skips_nothing(
    store: Store,
    embeddings: EmbeddingsClient,
    fake_llm: FakeLLM,
    rewrite: Callable[[dict[str, Any]], Any],
) -> None:
    ids = await five_messages(store)
    fake_llm.embedding_rewrite = rewrite
    embedder = Embedder(store, embeddings, batch_size=5, idle_seconds=NEVER_SECONDS)
    embedder.start()
    try:
        await until(lambda: embedder.pause_seconds > 0, "the embedder to pause")
        assert embedder.pause_seconds == embedder.retry_first_seconds
        assert await store.embedding_backlog(MODEL) == len(TEXTS)
        fake_llm.embedding_rewrite = None
        embedder.wake()
        await emptied(store)
        assert await embedded_ids(store, ids) == set(ids)
    finally:
        await embedder.stop()


# ---- search --------------------------------------------------------------------------------

QUERY = "feline rain"
"""Lexical search finds the rainy hike (and its neighbours), only a vector the kitten."""


async def searched(store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM) -> list[str]:
    """What a search for :data:`QUERY` finds once every message has its vector."""
    fake_llm.embedding_synonyms = {"feline": "cat", "kitten": "cat"}
    await five_messages(store)
    await embed_everything(Embedder(store, embeddings, batch_size=5))
    found = await Recall(store, embeddings).search("example", QUERY, [AUDIENCE], 5)
    return [hit.text for hit in found]


async def lexically(store: Store) -> list[str]:
    return [hit.text for hit in await store.search("example", QUERY, [AUDIENCE], 5)]


async def test_a_good_query_vector_finds_what_lexical_search_misses(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM
) -> None:
    found = await searched(store, embeddings, fake_llm)
    assert TEXTS[0] in found and TEXTS[0] not in await lexically(store)


@pytest.mark.parametrize("answer", BAD_VECTORS.values(), ids=BAD_VECTORS.keys())
async def test_a_bad_query_vector_leaves_search_lexical(
    store: Store, embeddings: EmbeddingsClient, fake_llm: FakeLLM, answer: Any
) -> None:
    fake_llm.embedding_answers[QUERY] = answer
    assert await searched(store, embeddings, fake_llm) == await lexically(store)


QUERY_WHOLLY_BAD = {k: v for k, v in WHOLLY_BAD.items() if k != "an index twice"}
"""(One text's answer has one index.)"""


@pytest.mark.parametrize("rewrite", QUERY_WHOLLY_BAD.values(), ids=QUERY_WHOLLY_BAD.keys())
async def test_a_wholly_bad_answer_to_a_query_leaves_search_lexical(
    store: Store,
    embeddings: EmbeddingsClient,
    fake_llm: FakeLLM,
    rewrite: Callable[[dict[str, Any]], Any],
) -> None:
    fake_llm.embedding_rewrite = lambda body: rewrite(body) if len(body["data"]) == 1 else body
    assert await searched(store, embeddings, fake_llm) == await lexically(store)
