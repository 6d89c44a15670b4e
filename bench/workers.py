"""Several workers on one PostgreSQL: how turns per second scale with workers, what
PostgreSQL costs against SQLite, how long a failover takes, and store round trips per turn.

1. Scaling: 1, 2 and 4 ``companion run`` workers (child processes) on one PostgreSQL database,
   the fake Bot API in this process, a fake LLM that takes 1 s per call in a process of its own.
   Closed loop: ``--chats`` chats each send their next message as soon as the last one was
   answered; turns per second are counted over ``--seconds`` after every chat had its first
   answer. To be bound by LLM waiting and not by the 2 cores, each worker runs at most
   ``--concurrency`` turns at once (``[dispatch] max_concurrent_turns``) and there are more
   chats than all workers together can run: the ceiling is workers x concurrency turns per
   second, and the CPU each worker (and this process, which plays Telegram) used is printed
   beside it — far below one core each means the LLM wait is what bounds the figure — with the
   CPU all workers used per turn and the machine's load average: the counts are measured one
   after another, and a shared machine's other work that comes and goes between them moves
   the ratios as much as anything of ours does.
2. One worker, the same closed loop, on PostgreSQL and on SQLite.
3. Failover: two workers on PostgreSQL and a fake LLM that answers at once; ``--kills`` times
   the longest-running worker (the leader: leadership moves only when a leader dies) is
   killed with SIGKILL, a message is sent to a new chat, and the time from the kill to its
   reply is taken; then the dead worker is started again. p50 and p95 are printed.
4. Store round trips per turn in a running session, in this process, on both backends.
5. Flap recovery: two workers on PostgreSQL with a 1 s poll and a 10 s watchdog; ``--flaps``
   times the leader is paused (SIGSTOP) past its lease and its watchdog, resumed (the other
   worker leads by then), and the other worker is stopped, so the first leads again: the time
   from that stop to the reply to a message sent at that moment is taken (how long the
   deployment hears no Telegram after a flap); then the stopped worker is started again.

Figures only: nothing here asserts a timing. The PostgreSQL server is the tests' throwaway one
(tests/postgres_server.py), so the machine needs PostgreSQL installed as the tests do.

    .venv/bin/python bench/workers.py [--chats 64] [--concurrency 8] [--seconds 15] [--kills 10]
                                      [--flaps 5] [--only scaling|backends|failover|trips|flaps]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.llm_process import llm_process  # noqa: E402
from bench.telegram_throughput import Replies  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.deployment import StorageConfig  # noqa: E402
from bot.config.model import Config  # noqa: E402
from bot.events import ChatRef, Inbound, Outbound, Sender  # noqa: E402
from tests.e2e.gateway_process import GatewayProcess, write_config  # noqa: E402
from tests.fakes.fake_telegram import TOKEN, FakeTelegram  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

LLM_SECONDS = 1.0
WORKER_COUNTS = (1, 2, 4)
FIRST_CHAT = 400_001
FAILOVER_CHAT = 900_001
REPLY_TIMEOUT_SECONDS = 120.0
TRIPS_TURNS = 200
TRIPS_CHATS = 20
"""Round trips are counted over TRIPS_TURNS turns taken in turn by TRIPS_CHATS chats, after
each chat's first (which opens its session)."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
FLAP_CHAT = 950_001
FLAP_FREEZE_SECONDS = 12.0
"""How long the leader is paused: past its lease and its poll's watchdog (below)."""
FLAP_SETTINGS: dict[str, dict[str, Any]] = {
    "workers": {"lease_seconds": 3, "heartbeat_seconds": 1},
    "telegram": {"poll_timeout_seconds": 1, "watchdog_seconds": 10},
}


def postgres_ready() -> str | None:
    """Why the PostgreSQL parts cannot run in this build, or None when they can."""
    if "database_url" not in StorageConfig.model_fields:
        return "this build has no [storage] database_url yet (the PostgreSQL store)"
    return None


def workers_ready() -> str | None:
    """Why several workers cannot share one database in this build, or None when they can."""
    if "workers" not in Config.model_fields:
        return "this build has no workers yet (leases and the elected leader): two would both poll"
    return None


# ---- the gateway's processes ----------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


@dataclass
class Deployment:
    """Worker processes on one database, all reaching the same fakes."""

    tmp: Path
    fake: FakeTelegram
    llm_url: str
    database_url: str | None
    concurrency: int
    workers: list[GatewayProcess]
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Keys added to each worker's sections (``workers``, ``telegram``)."""

    def config(self, slot: int) -> Path:
        storage: dict[str, Any] = {"data_dir": self.tmp / f"worker-{slot}"}
        if self.database_url:
            storage["database_url"] = self.database_url
        sections: dict[str, dict[str, Any]] = {
            "llm": {"base_url": self.llm_url, "api_key": "x", "max_retries": 0},
            "storage": storage,
            "owner": {"timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
            "dispatch": {"max_concurrent_turns": self.concurrency},
            "telegram": {"token": TOKEN, "base_url": self.fake.base_url},
        }
        for name, values in self.settings.items():
            sections.setdefault(name, {}).update(values)
        return write_config(self.tmp / f"worker-{slot}.toml", sections)

    async def start(self, slot: int) -> GatewayProcess:
        worker = await GatewayProcess.start(self.config(slot), self.tmp / f"worker-{slot}.log")
        await worker.wait_ready()
        if slot < len(self.workers):
            self.workers[slot] = worker
        else:
            self.workers.append(worker)
        return worker

    async def close(self) -> None:
        for worker in self.workers:
            await worker.close()


@contextlib.asynccontextmanager
async def deployment(
    fake: FakeTelegram,
    llm_url: str,
    database_url: str | None,
    size: int,
    concurrency: int,
    settings: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Deployment]:
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        running = Deployment(
            Path(tmp), fake, llm_url, database_url, concurrency, [], settings or {}
        )
        try:
            for slot in range(size):  # one after another: the first migrates the database
                await running.start(slot)
            yield running
        finally:
            await running.close()


# ---- 1 and 2: closed-loop throughput -------------------------------------------------------


@dataclass
class Throughput:
    turns_per_second: float
    cpu_per_worker: list[float]
    """Share of one core each worker used during the window."""
    cpu_driver: float
    """Share of one core this process (the fake Telegram) used."""
    cpu_ms_per_turn: float
    """CPU milliseconds all workers together used per turn."""
    load: float
    """The machine's one-minute load average at the window's end (others' work counts)."""


async def closed_loop(fake: FakeTelegram, workers: list[GatewayProcess], chats: int,
                      seconds: float) -> Throughput:  # fmt: skip
    """Every chat sends its next message when the last was answered, until the window ends."""
    replies = Replies(fake)
    watcher = asyncio.create_task(replies.watch())
    stop = asyncio.Event()
    numbers = itertools.count()

    async def conversation(chat_id: int) -> None:
        sent = 0
        while not stop.is_set():
            fake.send_user_message(chat_id=chat_id, text=f"hello {next(numbers)}", first_name="U")
            sent += 1
            await replies.wait(chat_id, sent)

    talks = [asyncio.create_task(conversation(FIRST_CHAT + i)) for i in range(chats)]
    # the window opens once every chat had its first answer: sessions exist, workers are warm
    async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
        for i in range(chats):
            await replies.wait(FIRST_CHAT + i, 1)
    answered = sum(replies.count.values())
    cpu = [cpu_seconds(w.pid) for w in workers]
    driver = time.process_time()
    started = time.perf_counter()
    await asyncio.sleep(seconds)  # the measuring window, not a wait for anything
    elapsed = time.perf_counter() - started
    turns = sum(replies.count.values()) - answered
    cpu = [(cpu_seconds(w.pid) - before) / elapsed for w, before in zip(workers, cpu, strict=True)]
    driver = (time.process_time() - driver) / elapsed
    stop.set()
    for talk in talks:
        talk.cancel()
    watcher.cancel()
    await asyncio.gather(*talks, watcher, return_exceptions=True)
    per_turn = sum(cpu) * elapsed / turns * 1000 if turns else float("nan")
    return Throughput(turns / elapsed, cpu, driver, per_turn, os.getloadavg()[0])


async def throughput(llm_url: str, database_url: str | None, size: int,
                     args: argparse.Namespace) -> Throughput:  # fmt: skip
    async with (
        FakeTelegram() as fake,
        deployment(fake, llm_url, database_url, size, args.concurrency) as running,
    ):
        return await closed_loop(fake, running.workers, args.chats, args.seconds)


def show(name: str, result: Throughput, ceiling: float) -> None:
    cpu = ", ".join(f"{share:.0%}" for share in result.cpu_per_worker)
    print(
        f"{name:<24} {result.turns_per_second:6.1f} turns/s (ceiling {ceiling:.0f}, "
        f"{result.turns_per_second / ceiling:.0%} of it); CPU per worker {cpu}, "
        f"{result.cpu_ms_per_turn:.0f} ms per turn; Telegram fake {result.cpu_driver:.0%}; "
        f"load average {result.load:.1f}"
    )


async def scaling(server: PostgresServer, args: argparse.Namespace) -> None:
    print(f"1. workers on PostgreSQL, LLM {LLM_SECONDS:.0f} s per call, {args.chats} chats")
    rates: dict[int, float] = {}
    async with llm_process(LLM_SECONDS) as llm_url:
        for size in WORKER_COUNTS:
            database = await server.create_database()
            try:
                result = await throughput(llm_url, server.url(database), size, args)
            finally:
                await server.drop_database(database)
            rates[size] = result.turns_per_second
            show(f"{size} worker(s)", result, size * args.concurrency / LLM_SECONDS)
    one = rates[1]
    print(
        f"   2 workers {rates[2] / one:.2f}x of one (goal >= 1.8x), "
        f"4 workers {rates[4] / one:.2f}x (goal >= 3.5x)"
    )


async def backends(server: PostgresServer, args: argparse.Namespace) -> None:
    print("2. one worker, PostgreSQL against SQLite")
    async with llm_process(LLM_SECONDS) as llm_url:
        sqlite = await throughput(llm_url, None, 1, args)
        show("SQLite", sqlite, args.concurrency / LLM_SECONDS)
        database = await server.create_database()
        try:
            postgres = await throughput(llm_url, server.url(database), 1, args)
        finally:
            await server.drop_database(database)
        show("PostgreSQL", postgres, args.concurrency / LLM_SECONDS)
    ratio = postgres.turns_per_second / sqlite.turns_per_second
    print(f"   PostgreSQL / SQLite: {ratio:.2f}x (goal >= 0.8x)")


# ---- 3: failover ---------------------------------------------------------------------------


async def failover(server: PostgresServer, args: argparse.Namespace) -> None:
    print(f"3. failover: kill -9 of the leader of two workers, {args.kills} times")
    database = await server.create_database()
    seconds: list[float] = []
    try:
        async with (
            FakeTelegram() as fake,
            llm_process(0.0) as llm_url,
            deployment(fake, llm_url, server.url(database), 2, args.concurrency) as running,
        ):
            replies = Replies(fake)
            watcher = asyncio.create_task(replies.watch())
            started_at = [time.monotonic(), time.monotonic()]
            for kill in range(args.kills):
                leader = min(range(2), key=lambda slot: started_at[slot])
                await running.workers[leader].kill()
                killed = time.perf_counter()
                chat = FAILOVER_CHAT + kill
                fake.send_user_message(chat_id=chat, text="are you there?", first_name="U")
                await asyncio.wait_for(replies.wait(chat, 1), REPLY_TIMEOUT_SECONDS)
                seconds.append(time.perf_counter() - killed)
                await running.start(leader)
                started_at[leader] = time.monotonic()
            watcher.cancel()
    finally:
        await server.drop_database(database)
    seconds.sort()
    p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    print(
        f"   time from kill to the next reply: p50 {statistics.median(seconds):.2f} s, "
        f"p95 {p95:.2f} s, worst {seconds[-1]:.2f} s (goal p95 <= 5 s)"
    )


# ---- 5: flap recovery ------------------------------------------------------------------------


async def flaps(server: PostgresServer, args: argparse.Namespace) -> None:
    print(f"5. flap recovery: the leader of two paused past its watchdog, {args.flaps} times")
    database = await server.create_database()
    seconds: list[float] = []
    try:
        async with (
            FakeTelegram() as fake,
            llm_process(0.0) as llm_url,
            deployment(
                fake, llm_url, server.url(database), 2, args.concurrency, FLAP_SETTINGS
            ) as running,
        ):
            replies = Replies(fake)
            watcher = asyncio.create_task(replies.watch())
            for flap in range(args.flaps):  # slot 0 leads: it started first, and leads again
                seconds.append(await flap_once(running, replies, FLAP_CHAT + flap))
            watcher.cancel()
    finally:
        await server.drop_database(database)
    seconds.sort()
    p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    print(
        f"   flap recovery (stop of the other worker to the next reply): p50 "
        f"{statistics.median(seconds):.2f} s, p95 {p95:.2f} s, worst {seconds[-1]:.2f} s"
    )


async def flap_once(running: Deployment, replies: Replies, chat: int) -> float:
    """Pause worker 0 past its watchdog, resume it, stop worker 1; seconds from that stop to
    the reply to a message sent then. Worker 1 is started again afterwards."""
    leader = running.workers[0]
    os.kill(leader.pid, signal.SIGSTOP)
    await asyncio.sleep(FLAP_FREEZE_SECONDS)  # the freeze being measured
    resumed = len(leader.lines)
    os.kill(leader.pid, signal.SIGCONT)
    await leader.wait_for_line("no longer leads", since=resumed)
    await running.workers[1].terminate()
    stopped = time.perf_counter()
    running.fake.send_user_message(chat_id=chat, text="are you there?", first_name="U")
    await asyncio.wait_for(replies.wait(chat, 1), REPLY_TIMEOUT_SECONDS)
    recovery = time.perf_counter() - stopped
    await running.start(1)
    return recovery


# ---- 4: store round trips per turn -----------------------------------------------------------


class CountingChannel:
    """A platform stand-in that only notes that a reply went out."""

    platform = "bench"
    connected = True

    def __init__(self) -> None:
        self.replies = asyncio.Queue[str]()

    async def start(self, receiver: Any) -> None:
        del receiver

    async def stop(self) -> None:
        pass

    def split(self, text: str) -> list[str]:
        return [text]

    async def send(self, message: Outbound) -> str:
        self.replies.put_nowait(message.chat.chat_id)
        return f"out-{time.perf_counter_ns()}"

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        del chat, partner_id

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> None:
        del chat, reply_to, partner_id


async def round_trips(data_dir: Path, llm_url: str, database_url: str | None) -> float:
    storage: dict[str, Any] = {"data_dir": str(data_dir)}
    if database_url:
        storage["database_url"] = database_url
    config = Config.model_validate(
        {
            "llm": {"base_url": llm_url, "api_key": "x", "max_retries": 0},
            "storage": storage,
            "owner": {"timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
        }
    )
    channel = CountingChannel()
    app = await build_app(config, {"bench": channel})
    await app.start()
    try:
        trips_before = 0
        for number in range(TRIPS_TURNS + TRIPS_CHATS):
            if number == TRIPS_CHATS:
                await app.dispatcher.idle()
                trips_before = app.store.round_trips
            chat = str(number % TRIPS_CHATS)
            await app.gateway.receive(
                Inbound(
                    ChatRef("bench", chat, "dm"),
                    Sender("bench", chat, f"user {chat}"),
                    f"m{number}",
                    f"hello number {number}",
                    datetime.now(UTC),
                )
            )
            await asyncio.wait_for(channel.replies.get(), REPLY_TIMEOUT_SECONDS)
        await app.dispatcher.idle()
        return (app.store.round_trips - trips_before) / TRIPS_TURNS
    finally:
        await app.stop()


async def trips(server: PostgresServer | None) -> None:
    print("4. store round trips per turn in a running session on PostgreSQL (goal <= 8)")
    with tempfile.TemporaryDirectory(prefix="bench-trips-") as tmp:
        async with llm_process(0.0) as llm_url:
            if server is None:
                print(
                    "   (PostgreSQL only: SQLite's hand-offs stay in the process; no server here)"
                )
                return
            database = await server.create_database()
            try:
                postgres = await round_trips(Path(tmp) / "pg", llm_url, server.url(database))
            finally:
                await server.drop_database(database)
            print(f"   PostgreSQL {postgres:.1f}")


# ---- the run -----------------------------------------------------------------------------


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=64, help="chats talking at once")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="[dispatch] max_concurrent_turns per worker"
    )
    parser.add_argument("--seconds", type=float, default=15.0, help="measuring window")
    parser.add_argument("--kills", type=int, default=10, help="failovers to time")
    parser.add_argument("--flaps", type=int, default=5, help="leadership flaps to time")
    parser.add_argument(
        "--only",
        choices=("scaling", "backends", "failover", "trips", "flaps"),
        help="run one part",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    missing = postgres_ready()
    if missing:
        print(f"PostgreSQL parts not run: {missing}")
        async with llm_process(LLM_SECONDS) as llm_url:
            sqlite = await throughput(llm_url, None, 1, args)
        show("one worker on SQLite", sqlite, args.concurrency / LLM_SECONDS)
        await trips(None)
        return
    server = await asyncio.to_thread(PostgresServer.start)
    try:
        several = workers_ready()
        if several:
            print(f"1. and 3. (several workers, failover) not run: {several}")
        if not several and args.only in (None, "scaling"):
            await scaling(server, args)
        if args.only in (None, "backends"):
            await backends(server, args)
        if not several and args.only in (None, "failover"):
            await failover(server, args)
        if args.only in (None, "trips"):
            await trips(server)
        if not several and args.only in (None, "flaps"):
            await flaps(server, args)
    finally:
        await asyncio.to_thread(server.stop)


if __name__ == "__main__":
    asyncio.run(main())
