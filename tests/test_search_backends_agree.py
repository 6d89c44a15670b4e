"""SQLite's FTS5 and PostgreSQL's BM25 in SQL rank the same terms the same way: one seeded
history in both, every query's results in the same order (bench/recall.py --backend postgres
does the same on the recall set)."""

from __future__ import annotations

import random
from pathlib import Path

from bot.store import NewMessage, Store
from bot.store.opening import open_store

WORDS = (
    "tea garden kitten island rain train lyon hiking coffee book sister cake sunday piano",
    "walked joined adopting names river 東京 京都 大阪 红叶 山上 看到 咖啡 学校",
)
VOCABULARY = [word for line in WORDS for word in line.split(" ")]
AUDIENCES = ("user:a", "user:b", "chat:g")


async def seeded_history(store: Store) -> None:
    rng = random.Random(7)
    clock = 1_000_000.0
    messages = []
    for number in range(300):
        clock += rng.uniform(1, 100)
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(1, 12)))
        messages.append(
            NewMessage(
                f"chat{number % 7}",
                rng.choice(("user", "assistant", "context")),
                text,
                rng.choice(AUDIENCES),
                partner_id=rng.choice(("p", "q")),
                created_at=clock,
            )
        )
    await store.add_messages(messages)


async def test_both_backends_rank_every_query_alike(postgres_database: str, tmp_path: Path) -> None:
    sqlite = await open_store(tmp_path / "db.sqlite")
    postgres = await open_store(postgres_database)
    try:
        await seeded_history(sqlite)
        await seeded_history(postgres)
        rng = random.Random(11)
        queries = [" ".join(rng.sample(VOCABULARY, rng.randint(1, 4))) for _ in range(40)]
        queries += ["東京の紅葉", "去山上看红叶", "walking with my kitten"]
        compared = 0
        for query in queries:
            for audiences in (["user:a"], ["user:a", "chat:g"], None):
                on_sqlite = await sqlite.search("p", query, audiences, 20)
                on_postgres = await postgres.search("p", query, audiences, 20)
                assert [h.message_id for h in on_postgres] == [h.message_id for h in on_sqlite], (
                    query,
                    audiences,
                )
                compared += bool(on_sqlite)
        assert compared > 100  # most queries find something: the orders were compared
    finally:
        await sqlite.close()
        await postgres.close()
