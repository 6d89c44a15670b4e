"""Query and passage prefixes: a search's text and a stored message's text reach the
embeddings endpoint each with its own marker (the model family's preset, or what
``[embeddings]`` sets), through the real openai client against the fake endpoint."""

from __future__ import annotations

from pathlib import Path

from bot.config.services import EmbeddingsConfig, LLMConfig
from bot.services.embeddings import EmbeddingsClient
from bot.store import NewMessage
from bot.store.opening import open_store
from bot.workers.embedder import Embedder
from partners.recall import Recall
from tests.fakes.fake_llm import FakeLLM

AUDIENCE = "user:test:42"


def client(llm: FakeLLM, model: str, **prefixes: str) -> EmbeddingsClient:
    config = EmbeddingsConfig(base_url=llm.base_url, model=model, query_timeout=5, **prefixes)
    return EmbeddingsClient(config, LLMConfig(base_url=llm.base_url))


def inputs(llm: FakeLLM) -> list[str]:
    return [text for body in llm.embedding_requests for text in body["input"]]


async def test_messages_go_out_as_passages_and_searches_as_queries(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    store = await open_store(tmp_path / "gateway.db")
    e5 = client(fake_llm, "intfloat/multilingual-e5-small")
    try:
        await store.add_message(
            NewMessage("test:42", "user", "I adopted a kitten", AUDIENCE, partner_id="example")
        )
        assert await Embedder(store, e5, 10).run_once() == 1
        assert inputs(fake_llm) == ["passage: I adopted a kitten"]
        await Recall(store, e5).search("example", "my cat", [AUDIENCE], 5)
        assert inputs(fake_llm)[1:] == ["query: my cat"]
    finally:
        await e5.close()
        await store.close()


async def test_each_family_gets_its_own_markers_and_unknown_models_none(
    fake_llm: FakeLLM,
) -> None:
    expected = {
        "nomic-embed-text:latest": ("search_query: hi", "search_document: hi"),
        "BAAI/bge-small-en-v1.5": (
            "Represent this sentence for searching relevant passages: hi",
            "hi",
        ),
        "bge-m3": ("hi", "hi"),
        "text-embedding-3-small": ("hi", "hi"),
    }
    for model, (query, passage) in expected.items():
        fake_llm.embedding_requests.clear()
        embeddings = client(fake_llm, model)
        try:
            await embeddings.embed_query("hi")
            await embeddings.embed(["hi"])
        finally:
            await embeddings.close()
        assert inputs(fake_llm) == [query, passage], model


async def test_prefixes_set_in_the_config_win_over_the_preset(fake_llm: FakeLLM) -> None:
    embeddings = client(fake_llm, "multilingual-e5-small", query_prefix="", passage_prefix="doc: ")
    try:
        await embeddings.embed_query("hi")
        await embeddings.embed(["hi", "there"])
    finally:
        await embeddings.close()
    assert inputs(fake_llm) == ["hi", "doc: hi", "doc: there"]
    only_query = EmbeddingsConfig(
        base_url="http://127.0.0.1:9/v1", model="e5-base", query_prefix="q: "
    )
    assert only_query.prefixes() == ("q: ", "passage: ")


async def test_a_prefix_never_pushes_a_long_text_past_the_input_limit(fake_llm: FakeLLM) -> None:
    from bot.services.embeddings import MAX_INPUT_CHARS

    embeddings = client(fake_llm, "multilingual-e5-small")
    try:
        await embeddings.embed(["x" * (MAX_INPUT_CHARS + 50)])
    finally:
        await embeddings.close()
    [sent] = inputs(fake_llm)
    assert sent.startswith("passage: x") and len(sent) == MAX_INPUT_CHARS
