"""Wake-ups shared by concurrent writers (bot/store/postgres/wakeups.py), with the statement's
sending in the test's hands: one statement in flight at a time, the writers that come
meanwhile sent together in the next, each writer back only once its keys were sent, and a
statement that fails failing no writer. (On the real database:
tests/test_store_postgres_wake.py.)"""

from __future__ import annotations

import asyncio

from bot.store import StoreUnavailable
from bot.store.postgres.liveness import PENDING_CHANNEL
from bot.store.postgres.wakeups import WAKE_WORKERS, WakeUps

WAIT_SECONDS = 5.0


class Statements:
    """What WakeUps sends, each statement held until the test lets it go."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []
        self.started = asyncio.Event()
        self.go = asyncio.Event()
        self.refuse = False

    async def send(self, sql: str, channel: str, keys: list[str]) -> int:
        assert (sql, channel) == (WAKE_WORKERS, PENDING_CHANNEL)
        self.started.set()
        await asyncio.wait_for(self.go.wait(), WAIT_SECONDS)
        if self.refuse:
            raise StoreUnavailable("the database cannot be reached (connection lost)")
        self.sent.append(keys)
        return len(keys)


async def test_writers_that_come_while_a_wake_up_is_in_flight_share_the_next_statement() -> None:
    statements = Statements()
    wake_ups = WakeUps(statements.send)
    first = asyncio.create_task(wake_ups.wake(["tg:1|ava"]))
    await asyncio.wait_for(statements.started.wait(), WAIT_SECONDS)
    later = [asyncio.create_task(wake_ups.wake([f"tg:{n}|ava"])) for n in (2, 3, 2, 4)]
    statements.go.set()
    await asyncio.wait_for(asyncio.gather(first, *later), WAIT_SECONDS)
    assert statements.sent == [["tg:1|ava"], ["tg:2|ava", "tg:3|ava", "tg:4|ava"]]


async def test_a_writer_is_back_only_once_a_statement_with_its_keys_was_sent() -> None:
    statements = Statements()
    wake_ups = WakeUps(statements.send)
    first = asyncio.create_task(wake_ups.wake(["tg:1|ava"]))
    await asyncio.wait_for(statements.started.wait(), WAIT_SECONDS)
    second = asyncio.create_task(wake_ups.wake(["tg:2|ava"]))
    await asyncio.sleep(0)  # let it gather its key and queue behind the statement in flight
    assert not second.done()
    statements.go.set()
    await asyncio.wait_for(asyncio.gather(first, second), WAIT_SECONDS)
    assert statements.sent == [["tg:1|ava"], ["tg:2|ava"]]


async def test_a_wake_up_that_cannot_be_sent_fails_no_writer_and_the_next_is_sent() -> None:
    statements = Statements()
    wake_ups = WakeUps(statements.send)
    statements.refuse = True
    statements.go.set()
    await asyncio.wait_for(wake_ups.wake(["tg:1|ava"]), WAIT_SECONDS)
    statements.refuse = False
    await asyncio.wait_for(wake_ups.wake(["tg:2|ava"]), WAIT_SECONDS)
    assert statements.sent == [["tg:2|ava"]]


async def test_no_queue_key_sends_nothing() -> None:
    statements = Statements()
    statements.go.set()
    await WakeUps(statements.send).wake([])
    assert statements.sent == []
