"""What waking the workers costs when an inbound message is stored on PostgreSQL: messages per
second that 1, 8 and 64 concurrent writers store through the store's own ``add_message`` (the
gateway's call for an addressed message: one pending row with a queue key), four ways:

a. ``trigger``: as schema steps 17-21 did it, a trigger's ``pg_notify`` inside the insert's
   transaction (sent at its commit), the store sending nothing itself;
b. ``none``: no notification at all: the floor;
c. ``after``: no trigger; once the insert committed, each writer sends ``SELECT pg_notify(…)``
   in a statement of its own (the store sends nothing itself);
d. ``grouped``: the store as it is (schema step 23 on, bot/store/postgres/wakeups.py): as c,
   but the writers whose wake-ups come while one is in flight send theirs together in the
   next statement.

NOTIFY takes a database-wide lock at commit and holds it until the commit is over, flushing
the commit record included, so notifying transactions commit one at a time; a transaction
that only notifies writes nothing, and its commit waits for no disk. How much the lock costs
depends on what a commit waits for, so the bench runs on two servers, one after the other:
``durable`` (PostgreSQL's defaults, ``fsync`` and ``synchronous_commit`` on: what a
deployment runs) and ``tests`` (the tests' settings: neither, no commit waits for the disk).

Every run stores ``--messages`` messages (split among the writers) into a fresh copy of a
migrated database, after a warm-up of two messages per writer, on a pool of one connection
per writer; another connection listens on the channel, as a worker does, and counts what it
hears (a run that hears a wrong count is flagged). The ways are alternated in every round, in
a rotated order, and each figure is the median over ``--rounds`` rounds; the ratios are
medians of each round's own ratio (the machine is shared: rounds differ, a round's runs are
close in time). Figures only: nothing is asserted. The server is the tests' throwaway one
(tests/postgres_server.py).

    .venv/bin/python bench/notify.py [--messages 1000] [--rounds 5] [--writers 1,8,64]
                                     [--servers durable,tests]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.store import NewMessage  # noqa: E402
from bot.store.postgres.liveness import PENDING_CHANNEL  # noqa: E402
from bot.store.postgres.store import PostgresStore  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

WAYS = ("trigger", "none", "after", "grouped")
WARMUP_PER_WRITER = 2
HEAR_TIMEOUT_SECONDS = 30.0
TEXT = "I finally finished the book you told me about, the ending surprised me"
STEP_17_TRIGGER = """
CREATE FUNCTION pending_stored() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('companion_pending', NEW.queue_key);
    RETURN NULL;
END $$;
CREATE TRIGGER pending_stored AFTER INSERT ON messages FOR EACH ROW
WHEN (NEW.status = 'pending' AND NEW.queue_key IS NOT NULL)
EXECUTE FUNCTION pending_stored();
"""
"""The trigger schema step 17 created and step 23 dropped, word for word."""


class DurableServer(PostgresServer):
    """The tests' throwaway server with PostgreSQL's default durability: every commit that
    wrote something waits for its record to reach the disk, as in a deployment."""

    def _options(self) -> str:
        return f"-c listen_addresses='' -k {self.socket_dir}"


SERVERS: dict[str, type[PostgresServer]] = {"durable": DurableServer, "tests": PostgresServer}


class SilentStore(PostgresStore):
    """The store, sending no wake-up itself (ways a, b and c)."""

    async def _wake_workers(self, stored: Sequence[NewMessage]) -> None:
        del stored


class Listener:
    """A connection that listens on the channel, as a worker's liveness connection does."""

    def __init__(self) -> None:
        self.heard = 0
        self._changed = asyncio.Event()

    def notified(self, *args: object) -> None:
        del args
        self.heard += 1
        self._changed.set()

    async def until(self, count: int) -> bool:
        """Whether ``count`` notifications were heard (waiting for late ones), no more."""
        deadline = time.monotonic() + HEAR_TIMEOUT_SECONDS
        while self.heard < count and time.monotonic() < deadline:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), deadline - time.monotonic())
            except TimeoutError:
                break
        await asyncio.sleep(0.05)  # settle: one too many would arrive now
        return self.heard == count


class Writers:
    """Tasks storing pending messages through one store, each writer in its own chat."""

    def __init__(self, store: PostgresStore, pool: asyncpg.Pool, way: str) -> None:
        self.store = store
        self.pool = pool
        self.way = way
        self._serial = 0

    async def store_one(self, writer: int) -> None:
        self._serial += 1
        queue_key = f"tg:{writer}|ava"
        stored = await self.store.add_message(
            NewMessage(
                chat_key=f"tg:{writer}",
                role="user",
                text=TEXT,
                audience="dm",
                status="pending",
                dedup_key=f"tg:{writer}:{self._serial}",
                queue_key=queue_key,
                partner_id="ava",
                platform_message_id=str(self._serial),
                user_key=f"tg:user:{writer}",
                speaker="Tim",
            )
        )
        if stored is not None and self.way == "after":
            await self.pool.execute("SELECT pg_notify($1, $2)", PENDING_CHANNEL, queue_key)

    async def run(self, writers: int, each: int) -> float:
        """Seconds for every writer to store ``each`` messages, one after the other."""

        async def one(writer: int) -> None:
            for _ in range(each):
                await self.store_one(writer)

        started = time.perf_counter()
        await asyncio.gather(*(one(writer) for writer in range(writers)))
        return time.perf_counter() - started


async def one_run(server: PostgresServer, template: str, way: str, writers: int,
                  messages: int) -> tuple[float, bool]:  # fmt: skip
    """(messages/s, whether the listener heard what it should) of one way at one width."""
    name = await server.create_database(template)
    url = server.url(name)
    listener_connection = await asyncpg.connect(url)
    pool = await asyncpg.create_pool(url, min_size=writers, max_size=writers)
    try:
        if way == "trigger":
            await pool.execute(STEP_17_TRIGGER)
        listener = Listener()
        await listener_connection.add_listener(PENDING_CHANNEL, listener.notified)
        store = PostgresStore(pool, url) if way == "grouped" else SilentStore(pool, url)
        bench = Writers(store, pool, way)
        each = max(1, messages // writers)
        await bench.run(writers, WARMUP_PER_WRITER)
        seconds = await bench.run(writers, each)
        if way == "grouped":  # a key's wake-ups gathered into one: at least one per writer
            heard = await listener.until(writers) or listener.heard > writers
        else:
            heard = await listener.until(
                0 if way == "none" else writers * (each + WARMUP_PER_WRITER)
            )
        return writers * each / seconds, heard
    finally:
        await pool.close()
        await listener_connection.close()
        await server.drop_database(name)


async def measure(server: PostgresServer, args: argparse.Namespace) -> None:
    template = await server.migrated_template()
    for writers in args.writers:
        rates: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_ in range(args.rounds):
            order = WAYS[round_ % len(WAYS) :] + WAYS[: round_ % len(WAYS)]
            flags = []
            for way in order:
                rate, heard = await one_run(server, template, way, writers, args.messages)
                rates[way].append(rate)
                flags.append("" if heard else f" ({way}: WRONG NOTIFICATION COUNT)")
            print(
                f"   {writers:>2} writers, round {round_ + 1}: "
                + ", ".join(f"{way} {rates[way][-1]:,.0f}" for way in WAYS)
                + "".join(flags),
                flush=True,
            )
        _summary(writers, rates)


def _summary(writers: int, rates: dict[str, list[float]]) -> None:
    def ratio(way: str, base: str = "none") -> str:
        pairs = zip(rates[way], rates[base], strict=True)
        return f"{statistics.median(a / b for a, b in pairs):.2f}x"

    medians = ", ".join(f"{way} {statistics.median(rates[way]):,.0f}" for way in WAYS)
    print(
        f"   {writers:>2} writers: median msg/s {medians}\n"
        f"      against none: trigger {ratio('trigger')}, after {ratio('after')},"
        f" grouped {ratio('grouped')}; grouped against trigger {ratio('grouped', 'trigger')}",
        flush=True,
    )


async def on_server(kind: str, run: Callable[[PostgresServer], Awaitable[None]]) -> None:
    server = await asyncio.to_thread(SERVERS[kind].start)
    try:
        await run(server)
    finally:
        await asyncio.to_thread(server.stop)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages per run")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the four ways")
    parser.add_argument("--writers", default="1,8,64", help="writer counts, comma-separated")
    parser.add_argument("--servers", default="durable,tests", help="durable and/or tests")
    args = parser.parse_args()
    args.writers = [int(n) for n in args.writers.split(",")]
    for kind in args.servers.split(","):
        print(f"{kind} server, {args.messages} messages per run, {args.rounds} rounds (msg/s)")
        await on_server(kind, lambda server: measure(server, args))


if __name__ == "__main__":
    asyncio.run(main())
