"""Neighbour context: each message is also indexed with the words of the message before and
after it in the same conversation, so an answer is found by the question before it; context
never crosses an audience, and forgetting a message leaves no copy in its neighbours' rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.store import SCHEMA, NewMessage, Store, for_dialect
from bot.store.opening import open_store
from tests.conftest import Harness, StoreBackend, dm, group_message
from tests.fakes.fake_llm import Reply
from tests.store_support import indexed_rows


async def say(
    store: Store,
    text: str,
    role: str = "user",
    chat: str = "dm:a",
    audience: str = "user:a",
    user: str | None = "a",
) -> int:
    message_id = await store.add_message(
        NewMessage(chat, role, text, audience, partner_id="p", user_key=user)
    )
    assert message_id is not None
    return message_id


async def test_an_answer_is_found_by_the_question_before_it(store: Store) -> None:
    question = await say(store, "What are your pets' names?", role="assistant", user=None)
    answer = await say(store, "Luna and Oliver!")
    await say(store, "The weather is nice today")
    hits = await store.search("p", "names of the pets", None, 10)
    assert [h.message_id for h in hits] == [question, answer]


async def test_a_question_is_found_by_the_answer_after_it(store: Store) -> None:
    question = await say(store, "What are your pets' names?", role="assistant", user=None)
    answer = await say(store, "Luna and Oliver!")
    hits = await store.search("p", "Luna", None, 10)
    assert [h.message_id for h in hits] == [answer, question]


async def test_context_reaches_only_the_next_and_previous_message(store: Store) -> None:
    await say(store, "What are your pets' names?", role="assistant", user=None)
    answer = await say(store, "Luna and Oliver!")
    await say(store, "Anyway, how was your day?", role="assistant", user=None)
    await say(store, "Long, the bus was late.")
    hits = await store.search("p", "pets", None, 10)
    assert answer in [h.message_id for h in hits]
    assert len(hits) == 2


async def test_neighbours_never_cross_an_audience(store: Store) -> None:
    # an imported session can hold two people; each keeps their own thread
    await say(store, "my secret island is zanzibar", chat="import:s", audience="user:a")
    bob = await say(store, "nice weather", chat="import:s", audience="user:b", user="b")
    assert await store.search("p", "zanzibar", ["user:b"], 10) == []
    assert [h.message_id for h in await store.search("p", "weather", ["user:b"], 10)] == [bob]
    assert await store.search("p", "weather", ["user:a"], 10) == []


async def test_neighbours_never_cross_chats(store: Store) -> None:
    await say(store, "my secret island is zanzibar", chat="dm:a", audience="user:a")
    await say(store, "hello group", chat="group:g", audience="chat:g", user="b")
    assert await store.search("p", "zanzibar", ["chat:g"], 10) == []


async def test_forgetting_rewrites_the_neighbours_rows(
    store: Store, store_backend: StoreBackend
) -> None:
    group = {"chat": "group:g", "audience": "chat:g"}
    before = await say(store, "who is going to the tea party?", user="b", **group)
    await say(store, "my secret island is zanzibar", user="a", **group)
    after = await say(store, "sounds lovely", user="c", **group)
    assert len(await store.search("p", "zanzibar", None, 10)) == 3
    ids = await store.user_message_ids("p", "a", ("user", "assistant", "context"))
    assert await store.delete_messages(ids) == 1
    assert await store.search("p", "zanzibar", None, 10) == []
    assert await indexed_rows(store_backend, "zanzibar") == []
    # the survivors are each other's neighbours now
    hits = await store.search("p", "tea party", None, 10)
    assert [h.message_id for h in hits] == [before, after]


async def test_forget_history_leaves_no_copy_in_a_group(
    harness_on_each_backend: Harness,
) -> None:
    harness = harness_on_each_backend
    await harness.app.store.bind("test", "g1", "example", "command")
    for user, name, text in [
        (43, "Bob", "who brings the cake on Sunday?"),
        (42, "Alice", "my secret island is zanzibar"),
        (44, "Carol", "I can bring scones"),
    ]:
        await harness.send(group_message("g1", user, text, name=name))
    await harness.settle()
    store = harness.app.store
    assert len(await store.search("example", "zanzibar", None, 10)) == 3
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(42, "/forget history confirm"))
    await harness.settle()
    assert await store.search("example", "zanzibar", None, 10) == []
    database = harness.config.database
    backend = StoreBackend("sqlite" if isinstance(database, Path) else "postgres", database)
    assert await indexed_rows(backend, "zanzibar") == []
    assert "I can bring scones" in [
        h.text for h in await store.search("example", "scones", None, 10)
    ]


async def test_an_index_without_context_is_rebuilt_at_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    for number, step in enumerate(SCHEMA[:3], start=1):
        script = for_dialect(step, "sqlite")
        assert isinstance(script, str)
        db.executescript(f"BEGIN; {script}; PRAGMA user_version = {number}; COMMIT;")
    for text in ("What are your pets' names?", "Luna and Oliver!"):
        db.execute(
            "INSERT INTO messages (chat_key, partner_id, role, text, audience, status,"
            " created_at, terms, scope) VALUES ('dm', 'p', 'user', ?, 'user:a', 'done', 1.0,"
            " lower(?), 'scope')",
            (text, text),
        )
    db.close()
    store = await open_store(path)
    try:
        assert [h.text for h in await store.search("p", "pets", None, 10)] == [
            "What are your pets' names?",
            "Luna and Oliver!",
        ]
    finally:
        await store.close()


async def test_a_new_language_reaches_the_neighbours_columns_too(store: Store) -> None:
    await say(store, "¿Adoptamos un perro?", role="assistant", user=None)
    answer = await say(store, "Sí, uno pequeño")
    assert await store.search("p", "adoptar", None, 10) == []
    await store.set_search_language("p", "spanish")
    assert answer in [h.message_id for h in await store.search("p", "adoptar", None, 10)]
