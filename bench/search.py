"""partner_search latency at 10k, 100k and 1M stored messages, against a naive scan.

Both sides run in the same process on the same database, so the ratio holds on a noisy machine:
the index (FTS5 over folded, stemmed words and CJK bigrams with neighbour context, BM25 order,
per-user visibility) versus what a simple implementation does — a case-insensitive
``LIKE '%term%'`` scan, newest first, with the same visibility filter. It also prints the bytes
per stored message of the whole database and of the search index alone.

    .venv/bin/python bench/search.py            # 10k, 100k, 1M (a few minutes, ~1 GB disk)
    .venv/bin/python bench/search.py --max 100000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.store import NewMessage, Store  # noqa: E402
from bot.store.opening import open_store

USERS = 200
BATCH = 5000
QUERIES = 60
LIMIT = 30
CJK_WORDS = ["东京", "京都", "咖啡", "朋友", "工作", "周末", "电影", "猫咪", "旅行", "生日"]


def vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(8000)}
    return sorted(words)


def sentence(rng: random.Random, words: list[str]) -> str:
    if rng.random() < 0.1:
        return "我和" + "".join(rng.choices(CJK_WORDS, k=4)) + "一起"
    # Zipf-like: a few words are everywhere, most are rare
    picks = [words[min(int(rng.paretovariate(0.9)) - 1, len(words) - 1)] for _ in range(4)]
    picks += rng.choices(words, k=rng.randint(4, 14))
    rng.shuffle(picks)
    return " ".join(picks).capitalize() + "."


async def fill(store: Store, rng: random.Random, words: list[str], start: int, end: int) -> None:
    now = time.time()
    for first in range(start, end, BATCH):
        batch = [
            NewMessage(
                chat_key=f"bench:{i % USERS}",
                role="user" if i % 2 == 0 else "assistant",
                text=sentence(rng, words),
                audience=f"user:{i % USERS}",
                partner_id="bench",
                created_at=now - (end - i),
            )
            for i in range(first, min(first + BATCH, end))
        ]
        await store.add_messages(batch)


def make_queries(rng: random.Random, words: list[str]) -> list[str]:
    queries = []
    for i in range(QUERIES):
        if i % 6 == 0:
            queries.append(rng.choice(CJK_WORDS))
        elif i % 6 == 3:
            # a whole line of dialogue: every bigram is an OR'd term
            queries.append("你还记得我说过" + "".join(rng.choices(CJK_WORDS, k=3)) + "的事吗")
        else:
            queries.append(" ".join(rng.choices(words[200:], k=rng.randint(1, 2))))
    return queries


async def index_size(store: Store) -> tuple[float, float]:
    """Bytes per stored message: the whole database, and the search index alone."""
    db = store._db  # the benchmark measures storage with raw SQL; the gateway never does this
    pages = await (await db.execute("PRAGMA page_count")).fetchone()
    page_size = await (await db.execute("PRAGMA page_size")).fetchone()
    count = await (await db.execute("SELECT COUNT(*) FROM messages")).fetchone()
    index = await (
        await db.execute(
            "SELECT (SELECT SUM(LENGTH(block)) FROM message_index_data)"
            " + (SELECT SUM(LENGTH(sz)) FROM message_index_docsize)"
        )
    ).fetchone()
    assert pages and page_size and count and index
    return pages[0] * page_size[0] / count[0], index[0] / count[0]


async def naive(store: Store, query: str, audience: str) -> int:
    """What a plain implementation does: a case-insensitive substring scan, newest first."""
    db = store._db  # the benchmark's baseline needs raw SQL; the gateway never does this
    found = 0
    for term in query.split():
        async with db.execute(
            "SELECT id FROM messages WHERE partner_id = ? AND audience = ? AND text LIKE ?"
            " ORDER BY created_at DESC LIMIT ?",
            ("bench", audience, f"%{term}%", LIMIT),
        ) as cursor:
            found += len(await cursor.fetchall())
    return found


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


async def measure(store: Store, queries: list[str], rng: random.Random) -> dict[str, float]:
    indexed: list[float] = []
    scanned: list[float] = []
    for query in queries:
        audience = f"user:{rng.randrange(USERS)}"
        started = time.perf_counter()
        await store.search("bench", query, [audience], LIMIT)
        indexed.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await naive(store, query, audience)
        scanned.append((time.perf_counter() - started) * 1000)
    return {
        "p50": statistics.median(indexed),
        "p95": percentile(indexed, 95),
        "scan_p50": statistics.median(scanned),
        "scan_p95": percentile(scanned, 95),
    }


async def main(sizes: list[int]) -> None:
    rng = random.Random(7)
    words = vocabulary(rng)
    queries = make_queries(rng, words)
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "bench.db")
        stored = 0
        print(
            f"{'messages':>9} {'p50 ms':>8} {'p95 ms':>8} {'scan p50':>9} {'scan p95':>9} "
            f"{'speed-up p95':>12} {'db B/msg':>9} {'index B/msg':>11}"
        )
        for size in sizes:
            started = time.perf_counter()
            await fill(store, rng, words, stored, size)
            stored = size
            load = time.perf_counter() - started
            figures = await measure(store, queries, rng)
            ratio = figures["scan_p95"] / figures["p95"] if figures["p95"] else float("inf")
            database, index = await index_size(store)
            print(
                f"{size:>9} {figures['p50']:>8.2f} {figures['p95']:>8.2f} "
                f"{figures['scan_p50']:>9.1f} {figures['scan_p95']:>9.1f} {ratio:>11.0f}x "
                f"{database:>9.0f} {index:>11.0f}   (loaded in {load:.0f} s)",
                flush=True,
            )
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=int, default=1_000_000)
    args = parser.parse_args()
    asyncio.run(main([n for n in (10_000, 100_000, 1_000_000) if n <= args.max]))
