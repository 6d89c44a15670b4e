"""The vector side of semantic recall: one search's scan at 10k and 100k stored vectors.

What a search with ``[embeddings]`` on adds to the lexical query: the store reads the vectors
the asker may see (SQL filter, newest first, at most ``max_scan``), and they are compared with
the query's vector. Compared here two ways on the same candidates: numpy (one matrix product,
bot/services/vectors.py) and pure Python (a dot product per vector), to decide whether numpy is
worth a dependency. Then the same search through the in-memory vector cache
(partners/vector_cache.py): its first load, and a warm search (the vector log read included).
Vectors are random unit vectors of 384 dimensions (all-MiniLM-L6-v2's size; 1024
for bge-m3 scales the scoring linearly), all in one audience so every one is scanned.

    .venv/bin/python bench/vectors.py            # 10k and 100k (about a minute)
    .venv/bin/python bench/vectors.py --dim 1024
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.services.vectors import FLOAT32, nearest, pack, unit  # noqa: E402
from bot.store import NewMessage, NewVector, Store  # noqa: E402
from bot.store.opening import open_store
from partners.vector_cache import VectorCache, VectorFilter  # noqa: E402

MODEL = "bench-model"
AUDIENCE = "user:bench:1"
BATCH = 5000
ROUNDS = 7


async def fill(store: Store, count: int, dim: int, rng: np.random.Generator) -> None:
    for first in range(0, count, BATCH):
        size = min(BATCH, count - first)
        messages = [
            NewMessage("bench:1", "user", f"message {first + i}", AUDIENCE, partner_id="bench")
            for i in range(size)
        ]
        ids = await store.add_messages(messages)
        vectors = rng.standard_normal((size, dim)).astype(FLOAT32)
        await store.save_vectors(
            MODEL,
            [
                NewVector(message_id, m.text, dim, pack(unit(v)))
                for message_id, m, v in zip(ids, messages, vectors, strict=True)
                if message_id is not None
            ],
        )


def pure_python(query: list[float], candidates: list[tuple[int, bytes]], top: int) -> list[int]:
    """The same ranking without numpy: unpack each vector and take a dot product."""
    import array

    scored = []
    for message_id, blob in candidates:
        vector = array.array("f")
        vector.frombytes(blob)
        scored.append((sum(a * b for a, b in zip(query, vector, strict=True)), message_id))
    scored.sort(reverse=True)
    return [m for _, m in scored[:top]]


async def measure(count: int, dim: int) -> None:
    rng = np.random.default_rng(12)
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / "bench.db")
        try:
            await fill(store, count, dim, rng)
            query = unit(rng.standard_normal(dim))
            cache = VectorCache(store, 2**40)
            only = VectorFilter(await store.search_scopes("bench", [AUDIENCE]), count)
            started = time.perf_counter()
            await cache.nearest("bench", MODEL, query, 50, only)
            load_ms = (time.perf_counter() - started) * 1000
            cached_times = []
            fetch, numpy_times, python_times = [], [], []
            for round_ in range(ROUNDS):
                started = time.perf_counter()
                candidates = await store.vector_candidates("bench", [AUDIENCE], MODEL, dim, count)
                fetched = time.perf_counter()
                best = nearest(query, candidates, 50)
                scored = time.perf_counter()
                cached = await cache.nearest("bench", MODEL, query, 50, only)
                cached_times.append(time.perf_counter() - scored)
                assert cached == best
                fetch.append(fetched - started)
                numpy_times.append(scored - fetched)
                if round_ < 2:  # slow: two rounds are enough to see the ratio
                    started = time.perf_counter()
                    plain = pure_python(query.tolist(), candidates, 50)
                    python_times.append(time.perf_counter() - started)
                    assert plain[:10] == [m for m, _ in best[:10]]
        finally:
            await store.close()
    fetch_ms = statistics.median(fetch) * 1000
    numpy_ms = statistics.median(numpy_times) * 1000
    python_ms = statistics.median(python_times) * 1000
    cached_ms = statistics.median(cached_times) * 1000
    print(
        f"| {count:>7,} | {dim} | {fetch_ms:7.1f} ms | {numpy_ms:6.1f} ms | {python_ms:8.0f} ms "
        f"| {python_ms / numpy_ms:5.0f}x | {load_ms:7.0f} ms | {cached_ms:6.1f} ms |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    print(
        "| vectors | dim | SQL read | numpy score | pure Python score | ratio "
        "| cache first load | cached search |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for count in args.sizes:
        asyncio.run(measure(count, args.dim))


if __name__ == "__main__":
    main()
