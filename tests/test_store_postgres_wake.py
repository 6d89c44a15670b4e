"""Workers woken on PostgreSQL when a message waiting for a turn is stored
(bot/store/postgres/messages.py): whoever LISTENs on the pending channel, as a worker's
liveness connection does, hears each stored pending message's queue key once, once the row
is there to be read; messages that wait for nothing, and duplicates, wake nobody.

The listener cannot be asked whether nothing more will come, so each test ends with a marker
notification sent after the store returned: notifications arrive in the order they were
committed, so once the marker is heard every wake-up the store sent is heard too."""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import pytest

from bot.store import NewMedia, NewMessage, Store
from bot.store.opening import open_store
from bot.store.postgres.liveness import PENDING_CHANNEL
from tests.postgres_server import PostgresServer

WAIT_SECONDS = 15.0
MARKER = "-- end of test --"
_dedup = itertools.count(1)


class Listener:
    """A connection listening on the pending channel: the queue keys it heard, in order. It
    also reads, when it hears a key's n-th wake-up, whether n pending rows of that key can be
    read by then (a wake-up sent before its row committed would send a worker to find
    nothing)."""

    def __init__(self, connection: asyncpg.Connection, reader: asyncpg.Connection) -> None:
        self.connection = connection
        self.reader = reader
        self.heard: asyncio.Queue[str] = asyncio.Queue()
        self.early: list[str] = []
        self._counts: collections.Counter[str] = collections.Counter()
        self._reading = asyncio.Lock()

    def notified(self, connection: object, pid: int, channel: str, payload: str) -> None:
        del connection, pid, channel
        self._counts[payload] += 1
        asyncio.get_running_loop().create_task(self._note(payload, self._counts[payload]))

    async def _note(self, payload: str, nth: int) -> None:
        async with self._reading:  # one statement at a time on the reader; in arrival order
            pending = await self.reader.fetchval(
                "SELECT count(*) FROM messages WHERE status = 'pending' AND queue_key = $1",
                payload,
            )
        if payload != MARKER and pending < nth:
            self.early.append(payload)
        self.heard.put_nowait(payload)

    async def until_marker(self) -> list[str]:
        """The queue keys heard before the marker, which is sent now."""
        async with self._reading:
            await self.reader.execute("SELECT pg_notify($1, $2)", PENDING_CHANNEL, MARKER)
        heard = []
        while (payload := await asyncio.wait_for(self.heard.get(), WAIT_SECONDS)) != MARKER:
            heard.append(payload)
        assert self.early == [], "woken before the message could be read"
        return heard


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    name = await postgres_server.create_database(await postgres_server.migrated_template())
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


@pytest.fixture
async def store(database: str) -> AsyncIterator[Store]:
    opened = await open_store(database)
    yield opened
    await opened.close()


@pytest.fixture
async def listener(database: str) -> AsyncIterator[Listener]:
    connection = await asyncpg.connect(database)
    reader = await asyncpg.connect(database)
    listening = Listener(connection, reader)
    await connection.add_listener(PENDING_CHANNEL, listening.notified)
    yield listening
    await connection.close()
    await reader.close()


def _message(queue_key: str, status: str = "pending", dedup_key: str | None = None) -> NewMessage:
    return NewMessage(
        chat_key=queue_key.split("|")[0],
        role="user" if status == "pending" else "context",
        text="hello",
        audience="dm",
        status=status,
        dedup_key=dedup_key or f"m{next(_dedup)}",
        queue_key=queue_key if status == "pending" else None,
        partner_id="ava",
    )


async def test_each_stored_pending_message_wakes_listeners_once_with_its_queue_key(
    store: Store, listener: Listener
) -> None:
    await store.add_message(_message("tg:1|ava"))
    await store.add_message(_message("tg:2|ava"))
    await store.add_message(_message("tg:1|ava"))
    assert await listener.until_marker() == ["tg:1|ava", "tg:2|ava", "tg:1|ava"]


async def test_a_pending_message_with_media_wakes_listeners_once_it_is_stored(
    store: Store, listener: Listener
) -> None:
    voice = replace(_message("tg:3|ava"), media=(NewMedia("voice", "file-1", "audio/ogg", 3.0),))
    await store.add_message_with_media(voice)
    assert await listener.until_marker() == ["tg:3|ava"]


async def test_messages_stored_together_wake_listeners_once_per_queue_key(
    store: Store, listener: Listener
) -> None:
    await store.add_messages(
        [_message("tg:4|ava"), _message("tg:4|ava"), _message("tg:5|ava"), _message("tg:6", "done")]
    )
    assert await listener.until_marker() == ["tg:4|ava", "tg:5|ava"]


async def test_a_message_that_waits_for_no_turn_wakes_nobody(
    store: Store, listener: Listener
) -> None:
    await store.add_message(_message("tg:7", status="done"))
    assert await listener.until_marker() == []


async def test_a_duplicate_pending_message_wakes_nobody_again(
    store: Store, listener: Listener
) -> None:
    assert await store.add_message(_message("tg:8|ava", dedup_key="telegram:8:1")) is not None
    assert await store.add_message(_message("tg:8|ava", dedup_key="telegram:8:1")) is None
    assert await listener.until_marker() == ["tg:8|ava"]


async def test_concurrent_stores_wake_listeners_for_every_queue_key_before_they_return(
    store: Store, listener: Listener
) -> None:
    keys = [f"tg:{n}|ava" for n in range(100, 130)]
    await asyncio.gather(*(store.add_message(_message(key)) for key in keys))
    assert sorted(await listener.until_marker()) == sorted(keys)
