"""Semantic recall with an OpenAI-compatible embeddings endpoint (the fake LLM's
``/v1/embeddings``): vectors made in the background and in batches, never on the reply path;
search that falls back to lexical when the endpoint is down or slow; and the same visibility
rule as lexical search, so no vector leads to another user's DM or from a group into a DM."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot.config.model import parse_config
from bot.config.services import EmbeddingsConfig, LLMConfig
from bot.services.embeddings import EmbeddingsClient
from bot.store import NewMessage, Store
from bot.store.opening import open_store
from bot.workers.embedder import Embedder, reindex
from partners.recall import Recall, fuse
from tests.admin_support import admin
from tests.conftest import Harness, HarnessFactory, dm, group_message
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCallSpec
from tests.test_cli import companion, write_config

MODEL = "fake-embed"
ALICE, BOB = 42, 43
NO_MATCH = "no past messages match"


def embeddings(llm: FakeLLM, **extra: Any) -> dict[str, Any]:
    return {"base_url": llm.base_url, "model": MODEL, "batch_size": 3, "max_retries": 0, **extra}


async def with_embeddings(
    factory: HarnessFactory, llm: FakeLLM, storage: dict[str, Any] | None = None, **extra: Any
) -> Harness:
    llm.embedding_synonyms = {"kitten": "cat", "feline": "cat"}
    return await factory(embeddings=embeddings(llm, **extra), storage=storage or {})


async def backlog_cleared(harness: Harness, timeout: float = 10.0) -> None:
    """Wake the embedder and wait until every searchable message has its vector."""
    embedder = harness.app.embedder
    assert embedder is not None
    async with asyncio.timeout(timeout):
        while await harness.app.store.embedding_backlog(MODEL):
            embedder.wake()
            await asyncio.sleep(0.02)


def vector_rows(harness: Harness) -> dict[int, tuple[str, int]]:
    with sqlite3.connect(harness.config.data_dir / "gateway.db") as db:
        rows = db.execute("SELECT message_id, model, dim FROM message_vectors").fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


async def said_in_dm(harness: Harness, user: int, text: str) -> int:
    message_id = await harness.app.store.add_message(
        NewMessage(
            f"test:{user}",
            "user",
            text,
            f"user:test:{user}",
            partner_id="example",
            user_key=f"test:{user}",
            speaker="Alice" if user == ALICE else "Bob",
        )
    )
    assert message_id is not None
    return message_id


async def search_as(harness: Harness, user: int, query: str, chat: str | None = None) -> str:
    """What partner_search answers the model in ``user``'s DM (or in group ``chat``)."""
    start = len(harness.llm.requests)
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_search", {"query": query})]), Reply(text="hm")
    )
    ask = "do you remember?"
    await harness.send(
        dm(user, ask) if chat is None else group_message(chat, user, f"@Mira {ask}", name="Alice")
    )
    await harness.settle()
    request = harness.llm.requests[start + 1]
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "tool")


# ---- off by default ------------------------------------------------------------------------


async def test_without_embeddings_nothing_is_embedded(harness: Harness) -> None:
    harness.llm.script(Reply(text="hello"))
    await harness.send(dm(ALICE, "I adopted a kitten"))
    await harness.settle()
    assert harness.app.embedder is None
    assert harness.llm.embedding_requests == []
    assert vector_rows(harness) == {}


def test_embeddings_need_both_an_endpoint_and_a_model() -> None:
    with pytest.raises(ValueError, match="embeddings.model is not set"):
        EmbeddingsConfig(base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="embeddings.base_url is not set"):
        EmbeddingsConfig(model="bge-m3")
    assert not EmbeddingsConfig().enabled


def test_the_embeddings_key_can_come_from_the_environment(tmp_path: Path) -> None:
    text = '[embeddings]\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\napi_key = "${EMB}"\n'
    config = parse_config(text, tmp_path / "config.toml", {"EMB": "sk-emb"})
    assert config.embeddings.api_key is not None
    assert config.embeddings.api_key.get_secret_value() == "sk-emb"
    assert config.embeddings.enabled


# ---- in the background, in batches ---------------------------------------------------------


async def test_messages_are_embedded_in_the_background_in_batches(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm)
    fake_llm.embedding_gate = asyncio.Event()  # the first batch is held at the endpoint...
    for text in ("I adopted a kitten", "we went hiking", "my sister moved to Lyon"):
        harness.llm.script(Reply(text=f"oh, {text}?"))
        await harness.send(dm(ALICE, text))
        await harness.settle()
    await fake_llm.wait_for_embeddings(1)
    fake_llm.embedding_gate.set()  # ...while the messages after it wait for the next batches
    await backlog_cleared(harness)
    searchable = await harness.app.store.user_message_ids("example", f"test:{ALICE}", ("user",))
    rows = vector_rows(harness)
    assert set(searchable) <= set(rows)
    assert {model for model, _ in rows.values()} == {MODEL}
    sizes = [len(r["input"]) for r in fake_llm.embedding_requests]
    assert sum(sizes) >= 6 and max(sizes) <= 3 and max(sizes) > 1


async def test_a_paraphrase_is_found_through_its_vector(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm)
    await said_in_dm(harness, ALICE, "I adopted a kitten last spring")
    await backlog_cleared(harness)
    assert "adopted a kitten" in await search_as(harness, ALICE, "my cat")


async def test_a_message_whose_text_changed_is_embedded_again(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    """A voice note's transcript replaces its placeholder after the message was embedded."""
    harness = await with_embeddings(harness_factory, fake_llm)
    message_id = await said_in_dm(harness, ALICE, "(voice note)")
    await backlog_cleared(harness)
    await harness.app.store.set_message_text(message_id, "I adopted a kitten last spring")
    assert await harness.app.store.embedding_backlog(MODEL) == 1
    await backlog_cleared(harness)
    assert "adopted a kitten" in await search_as(harness, ALICE, "my cat")


async def test_a_text_the_endpoint_refuses_is_skipped_and_the_rest_embedded(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm)
    fake_llm.embedding_max_chars = 100
    short = await said_in_dm(harness, ALICE, "I adopted a kitten")
    long = await said_in_dm(harness, ALICE, "and then " * 20)
    other = await said_in_dm(harness, ALICE, "we went hiking")
    await backlog_cleared(harness)
    assert set(vector_rows(harness)) == {short, other}
    embedder = harness.app.embedder
    assert embedder is not None and embedder.failures == 0
    assert long not in vector_rows(harness)


# ---- never on the reply path ---------------------------------------------------------------


async def test_endpoint_down_search_answers_lexically_and_the_backlog_is_retried(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm)
    fake_llm.embeddings_down = True
    await said_in_dm(harness, ALICE, "I adopted a kitten last spring")
    embedder = harness.app.embedder
    assert embedder is not None
    async with asyncio.timeout(10):
        while embedder.failures < 2:  # it tried, backed off, and tried again
            embedder.wake()
            await asyncio.sleep(0.02)
    assert "adopted a kitten" in await search_as(harness, ALICE, "kitten")
    assert await harness.app.store.embedding_backlog(MODEL) > 0
    fake_llm.embeddings_down = False
    await backlog_cleared(harness)
    assert embedder.failures == 0
    assert "adopted a kitten" in await search_as(harness, ALICE, "my cat")


async def test_a_slow_endpoint_never_holds_up_a_reply(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm, query_timeout=0.2)
    await said_in_dm(harness, ALICE, "I adopted a kitten last spring")
    fake_llm.embedding_gate = asyncio.Event()  # every embedding request is held
    embedder = harness.app.embedder
    assert embedder is not None
    embedder.wake()
    await fake_llm.wait_for_embeddings(1)  # the background batch is stuck at the endpoint
    async with asyncio.timeout(20):  # a bound on a broken build, not a measure of speed
        found = await search_as(harness, ALICE, "kitten")
    # the reply went out while both the batch and the query's vector were still held
    assert harness.channel.texts()[-1] == "hm"
    assert not fake_llm.embedding_gate.is_set() and len(fake_llm.embedding_requests) == 2
    assert "adopted a kitten" in found
    fake_llm.embedding_gate.set()
    await backlog_cleared(harness)


async def test_status_shows_the_embedding_backlog(
    harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm)
    fake_llm.embeddings_down = True
    await said_in_dm(harness, ALICE, "I adopted a kitten last spring")
    await said_in_dm(harness, ALICE, "and a puppy")
    assert f"embeddings ({MODEL}), 2 message(s) waiting" in await admin(harness, "/admin status")
    fake_llm.embeddings_down = False
    await backlog_cleared(harness)
    assert "0 message(s) waiting" in await admin(harness, "/admin status")


async def test_status_says_when_recall_is_lexical_only(harness: Harness) -> None:
    assert "Recall: lexical (no [embeddings]" in await admin(harness, "/admin status")


# ---- the same visibility as lexical search -------------------------------------------------


async def test_a_vector_never_leads_to_another_users_dm(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm, storage_on_each_backend)
    await said_in_dm(harness, ALICE, "I adopted a kitten last spring")
    await backlog_cleared(harness)
    assert "adopted a kitten" in await search_as(harness, ALICE, "my cat")  # it is findable
    assert (await search_as(harness, BOB, "my cat")).startswith(NO_MATCH)


async def test_a_vector_never_leads_from_a_group_into_a_dm(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory, fake_llm: FakeLLM
) -> None:
    harness = await with_embeddings(harness_factory, fake_llm, storage_on_each_backend)
    chat = "g1"
    await harness.app.store.bind("test", chat, "example", "command")
    await said_in_dm(harness, ALICE, "I adopted a kitten last spring")
    await backlog_cleared(harness)
    assert "adopted a kitten" in await search_as(harness, ALICE, "my cat")
    in_group = await search_as(harness, ALICE, "my cat", chat=chat)
    assert "adopted a kitten" not in in_group


# ---- models and reindexing -----------------------------------------------------------------


async def store_with_history(tmp_path: Path) -> tuple[Store, int]:
    store = await open_store(tmp_path / "gateway.db")
    kitten = await store.add_message(
        NewMessage("test:42", "user", "I adopted a kitten", "user:test:42", partner_id="example")
    )
    await store.add_message(
        NewMessage("test:42", "assistant", "How lovely!", "user:test:42", partner_id="example")
    )
    assert kitten is not None
    return store, kitten


def client(llm: FakeLLM, model: str) -> EmbeddingsClient:
    config = EmbeddingsConfig(base_url=llm.base_url, model=model, query_timeout=5)
    return EmbeddingsClient(config, LLMConfig(base_url=llm.base_url))


async def test_vectors_of_another_model_are_never_compared(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.embedding_synonyms = {"kitten": "cat"}
    fake_llm.embedding_seed = "same"  # both models answer alike: only the store tells them apart
    store, kitten = await store_with_history(tmp_path)
    old, new = client(fake_llm, "model-a"), client(fake_llm, "model-b")
    try:
        assert await Embedder(store, old, 10).run_once() == 2
        audiences = ["user:test:42"]
        assert [
            h.message_id for h in await Recall(store, old).search("example", "cat", audiences, 5)
        ] == [kitten]
        assert await Recall(store, new).search("example", "cat", audiences, 5) == []
        assert await store.embedding_backlog("model-b") == 2
        assert await reindex(store, new, "example", 10) == 2
        assert [
            h.message_id for h in await Recall(store, new).search("example", "cat", audiences, 5)
        ] == [kitten]
        assert await reindex(store, new, None, 10) == 0  # nothing left to do
    finally:
        await old.close()
        await new.close()
        await store.close()


def test_fusion_puts_what_both_rankings_found_first() -> None:
    assert fuse([1, 2, 3], [4, 3, 5])[0] == 3
    assert fuse([1, 2], [])[:2] == [1, 2]


async def test_reindex_backfills_and_search_then_finds_by_meaning(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        llm.embedding_synonyms = {"kitten": "cat"}
        plain = write_config(tmp_path, llm.base_url)
        code, out, err = await companion(plain, "reindex")
        assert code == 2 and "set [embeddings] base_url and model" in out + err
        config = write_config(
            tmp_path, llm.base_url, f'[embeddings]\nbase_url = "{llm.base_url}"\nmodel = "e"\n'
        )
        await companion(config, "partners", "new", "example", "--name", "Mira")
        records = [
            {"session": "s", "user": "telegram:5", "role": "user", "text": text, "time": 1.0}
            for text in ("I adopted a kitten", "we went hiking")
        ]
        source = tmp_path / "history.jsonl"
        source.write_text("\n".join(json.dumps(r) for r in records) + "\n")
        code, _, err = await companion(config, "import", "example", str(source))
        assert code == 0, err
        search = ("search", "example", "my cat", "--user", "telegram:5", "--json")
        llm.embeddings_down = True
        code, out, err = await companion(config, "reindex", "example")
        assert code == 2 and "run reindex again" in out + err
        llm.embeddings_down = False
        code, out, err = await companion(config, "reindex", "example")
        assert code == 0 and "embedded 2 messages" in out, err
        code, out, _ = await companion(config, *search)
        assert [h["text"] for h in json.loads(out)["results"]][:1] == ["I adopted a kitten"]
