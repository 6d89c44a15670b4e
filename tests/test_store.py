"""The store as an interface: every backend implements all of it and nothing beside it, a
database that cannot work raises the store's own errors (never a driver's), and a turn costs a
known number of round trips to PostgreSQL."""

from __future__ import annotations

import inspect
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bot.store import NewMessage, Store, StoreError, StoreFull, StoreUnavailable
from bot.store.connection import Connection
from bot.store.opening import open_store
from bot.store.postgres.store import PostgresStore
from tests.conftest import Harness, StoreBackend, dm
from tests.fakes.fake_llm import Reply

TURN_ROUND_TRIPS = 7
"""Round trips to PostgreSQL of a DM turn in a running session, everything included: the
chat and sender, the inbound row, the turn's context (queue, session, history, media,
reactions), the reply with its usage (which also tells whether an older reply of the chat
waits for a retry, so the delivery need not ask), the last chunk, and the queue found empty.
Every statement counts, BEGIN and COMMIT included, so each of these is one statement (SQLite
counts none: its hand-offs stay in the process), with the turn under its chat's lease: the
writes it fences check it in their own transaction (statement), and the lease is renewed only
when less than half of it is left, which a turn's time never comes near here (its lease lasts
an hour). The seventh: it wakes the other workers once the inbound row has committed, in a
statement of its own (a NOTIFY inside the insert made concurrent inserts commit one at a time:
bench/notify.py). The goal is 7 at most.
Measured; a change that adds trips must say why here, one that saves some lowers the figure."""


def public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


async def test_a_backend_offers_exactly_the_store_interface(store: Store) -> None:
    # a method added to a backend alone is one the gateway cannot rely on (opening is
    # bot.store.opening's; PostgreSQL alone counts its round trips)
    assert public_methods(type(store)) - {"path", "open", "round_trips"} == public_methods(Store)


async def test_a_stored_message_reads_back_after_a_restart(store_backend: StoreBackend) -> None:
    store = await store_backend.open()
    message_id = await store.add_message(NewMessage("c", "user", "hello", "user:a"))
    await store.close()
    store = await store_backend.open()
    try:
        assert message_id is not None
        found = await store.message(message_id)
        assert found is not None and found.text == "hello"
    finally:
        await store.close()


async def test_a_full_database_raises_store_full(tmp_path: Path) -> None:
    db = await Connection.open(tmp_path / "db.sqlite")
    try:
        await db.execute("CREATE TABLE t (x BLOB)")
        pages = (await db.execute_fetchall("PRAGMA page_count"))[0][0]
        # the database may not grow past its size now: as if the disk were full
        await db.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreFull, match="cannot store it"):
            await db.execute("INSERT INTO t VALUES (zeroblob(100000))")
    finally:
        await db.close()


async def test_a_locked_database_raises_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = await Connection.open(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        await db.execute("PRAGMA busy_timeout = 0")  # fail at once rather than wait
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreUnavailable) as raised:
            await db.execute("BEGIN IMMEDIATE")
        assert not isinstance(raised.value, StoreFull)
    finally:
        other.close()
        await db.close()


async def test_a_file_that_is_no_database_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database, " * 1000)
    with pytest.raises(StoreError, match="cannot use the database .*notes.txt"):
        await open_store(path)
    assert path.read_text() == "not a database, " * 1000


async def test_round_trips_of_a_turn_on_postgres(
    postgres_database: str, harness_factory: Callable[..., Awaitable[Harness]]
) -> None:
    # a heartbeat in the middle would count its own round trips: none falls in this turn
    workers = {"lease_seconds": 3600, "heartbeat_seconds": 600}
    harness = await harness_factory(workers=workers, storage={"database_url": postgres_database})
    store = harness.app.store
    assert isinstance(store, PostgresStore)
    harness.llm.script(Reply(text="hi"), Reply(text="hi again"))
    await harness.send(dm(7, "hello"))  # opens the session
    await harness.settle()
    before = store.round_trips
    await harness.send(dm(7, "how are you?"))
    await harness.settle()
    used = store.round_trips - before
    print(f"store round trips for one DM turn on PostgreSQL: {used}")
    assert len(harness.channel.texts()) == 2
    assert used <= TURN_ROUND_TRIPS
