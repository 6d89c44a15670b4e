"""SQLite stores a batch of messages (``add_messages``: an imported history) its own way,
indexing each once instead of through the per-row trigger (bot/store/sqlite_messages.py). The
rows, their thread neighbours' terms, the search scopes and the full-text index must end as
storing the same messages one at a time leaves them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.store import NewMessage
from bot.store.opening import open_store
from bot.store.search_terms import index_terms
from bot.store.searchable import audience_token, term_tag

PARTNER = "example"


def message(
    key: str, role: str, text: str, audience: str = "user:u1", chat: str = "c1"
) -> NewMessage:
    return NewMessage(
        chat_key=chat, role=role, text=text, audience=audience, dedup_key=key,
        partner_id=PARTNER, platform_message_id=key, created_at=1_700_000_000.0,
    )  # fmt: skip


EARLIER = [message("e1", "user", "the lighthouse keeper waved"), message("e2", "tool", "{}")]
BATCHES = [
    [
        message("b1", "assistant", "puffins nest on the cliffs"),
        message("b2", "user", "a ferry to the island", audience="user:u2"),
        message("e1", "user", "the lighthouse keeper waved"),  # stored before: skipped
        message("b3", "journal", "noted the tortoise Quincy"),  # searchable, in no thread
        message("b4", "user", "sourdough starter named Bubbles"),
        message("b4", "user", "sourdough starter named Bubbles"),  # twice in one batch
        message("b5", "tool", "not searchable"),
        message("b6", "context", "the market by the harbour", chat="c2"),
    ],
    [
        message("b7", "assistant", "the violin festival in winter"),
        message("b8", "assistant", "a lantern over the river", audience="user:u2"),
    ],
]
WORDS = ["lighthouse", "puffin", "ferry", "tortoise", "sourdough", "market", "violin", "lantern"]
QUERIES = [
    index_terms(word, tag=term_tag(audience_token(PARTNER, audience)))
    for word in WORDS
    for audience in ("user:u1", "user:u2")
]
"""Each word as the index holds it for each user: stemmed, tagged with its audience."""


async def store_both_ways(tmp_path: Path) -> tuple[Path, Path, list[list[int | None]]]:
    """The same messages stored in two databases: one at a time, and in batches."""
    alone, batched = tmp_path / "alone.db", tmp_path / "batched.db"
    ids: list[list[int | None]] = [[], []]
    for path, side in ((alone, 0), (batched, 1)):
        store = await open_store(path)
        try:
            for earlier in EARLIER:
                await store.add_message(earlier)
            for batch in BATCHES:
                if side == 0:
                    ids[0].extend([await store.add_message(m) for m in batch])
                else:
                    ids[1].extend(await store.add_messages(batch))
        finally:
            await store.close()
    return alone, batched, ids


def rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO message_index (message_index) VALUES ('integrity-check')")
        return {
            "messages": db.execute(
                "SELECT id, dedup_key, role, terms, scope, before_terms, after_terms"
                " FROM messages ORDER BY id"
            ).fetchall(),
            "scopes": db.execute("SELECT * FROM search_scopes ORDER BY 1, 2").fetchall(),
            "found": [
                (term, *db.execute(
                    "SELECT rowid FROM message_index WHERE message_index MATCH ? ORDER BY rowid",
                    (f'"{term}"',),
                ).fetchall())
                for term in QUERIES
            ],
        }  # fmt: skip


async def test_a_batch_is_stored_and_indexed_as_its_messages_one_at_a_time(
    tmp_path: Path,
) -> None:
    alone, batched, ids = await store_both_ways(tmp_path)
    assert ids[0] == ids[1]
    assert ids[1].count(None) == 2  # the one stored before, and the second of the pair
    one_by_one, in_batches = rows(alone), rows(batched)
    assert in_batches == one_by_one
    assert sum(len(found) > 1 for found in in_batches["found"]) == len(WORDS)  # each found
    terms = {r[1]: r[3] for r in in_batches["messages"]}
    threaded = {r[1]: (r[5], r[6]) for r in in_batches["messages"]}
    # user u1's thread in chat c1 runs from the message before the batches across both
    assert threaded["b1"] == (terms["e1"], terms["b4"])
    assert threaded["b4"] == (terms["b1"], terms["b7"])
    assert threaded["b7"] == (terms["b4"], None)
    assert threaded["b3"] == (None, None)
