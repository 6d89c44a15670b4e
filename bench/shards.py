"""Discord shard takeover on several workers (docs/architecture.md "Several workers": Discord
shards are leases too): how long a dead worker's shard stays dark.

Two ``companion run`` workers (child processes) on one PostgreSQL database divide a bot of two
shards, with the fake Discord in this process and the default ``[workers]`` timing (heartbeat
2 s, lease 10 s). ``--kills`` times, once each worker holds one shard and after a random pause
of up to ``--max-pause`` seconds (a worker dies at any moment, not just after the bot settled),
the worker holding shard 0 (every direct message) is killed with SIGKILL, and the time from the
kill to shard 0's next READY on the other worker is taken; then the dead worker is started
again and the bot rebalances. p50, p95 and the worst are printed.

Figures only: nothing here asserts a timing. The PostgreSQL server is the tests' throwaway one
(tests/postgres_server.py), so the machine needs PostgreSQL installed as the tests do.

    .venv/bin/python bench/shards.py [--kills 10] [--max-pause 10] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg  # noqa: E402

from bench.llm_process import llm_process  # noqa: E402
from tests.e2e.gateway_process import GatewayProcess, write_config  # noqa: E402
from tests.fakes.fake_discord import FakeDiscord  # noqa: E402
from tests.postgres_server import PostgresServer  # noqa: E402

SHARD_ZERO = [0, 2]
STEP_TIMEOUT_SECONDS = 120.0
GOAL_P95_SECONDS = 10.0


class Workers:
    """Two worker processes by slot on one database, reaching the fake Discord."""

    def __init__(self, tmp: Path, discord: FakeDiscord, llm_url: str, database_url: str) -> None:
        self.tmp = tmp
        self.discord = discord
        self.llm_url = llm_url
        self.database_url = database_url
        self.running: dict[int, GatewayProcess] = {}

    async def start(self, slot: int) -> None:
        config = write_config(
            self.tmp / f"worker-{slot}.toml",
            {
                "llm": {"base_url": self.llm_url, "api_key": "x", "max_retries": 0},
                "storage": {"data_dir": self.tmp / f"worker-{slot}",
                            "database_url": self.database_url},
                "owner": {"discord_ids": [1], "timezone": "UTC"},
                "discord": {"token": self.discord.token, "api_base": self.discord.api_base,
                            "gateway_url": self.discord.gateway_url, "shards": 2},
            },
        )  # fmt: skip
        worker = await GatewayProcess.start(config, self.tmp / f"worker-{slot}.log")
        await worker.wait_ready()
        self.running[slot] = worker

    async def holder_of_shard_zero(self) -> int | None:
        """The slot whose worker holds shard 0 while each worker holds one; else None."""
        connection = await asyncpg.connect(self.database_url)
        try:
            rows = await connection.fetch(
                "SELECT l.shard_id, w.pid FROM shard_leases l JOIN workers w USING (worker_id)"
                " WHERE l.shard_count = 2"
                " AND l.expires_at > extract(epoch FROM clock_timestamp())"
            )
        finally:
            await connection.close()
        holders = {int(row["shard_id"]): int(row["pid"]) for row in rows}
        if len(holders) != 2 or len(set(holders.values())) != 2:
            return None
        return next(slot for slot, w in self.running.items() if w.pid == holders[0])

    async def close(self) -> None:
        for worker in self.running.values():
            await worker.close()


def identified(discord: FakeDiscord) -> int:
    return [identify.get("shard") for identify in discord.identifies].count(SHARD_ZERO)


async def settled(workers: Workers) -> int:
    """Wait until each worker holds one shard; the slot holding shard 0."""
    deadline = time.monotonic() + STEP_TIMEOUT_SECONDS
    while (slot := await workers.holder_of_shard_zero()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the two workers did not settle on one shard each")
        await asyncio.sleep(0.1)
    return slot


async def one_takeover(workers: Workers, pause: float) -> float:
    """Kill shard 0's holder after ``pause`` seconds; seconds until shard 0 is READY again."""
    discord = workers.discord
    holder = await settled(workers)
    await asyncio.sleep(pause)
    before = identified(discord)
    await workers.running[holder].kill()
    killed = time.perf_counter()
    await discord.wait_until(
        lambda: identified(discord) > before and discord.serving(SHARD_ZERO),
        STEP_TIMEOUT_SECONDS,
        "shard 0 on the other worker",
    )
    seconds = time.perf_counter() - killed
    await workers.start(holder)
    return seconds


async def takeovers(server: PostgresServer, args: argparse.Namespace) -> list[float]:
    rng = random.Random(args.seed)
    database = await server.create_database()
    seconds: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
            async with FakeDiscord() as discord, llm_process(0.0) as llm_url:
                workers = Workers(Path(tmp), discord, llm_url, server.url(database))
                try:
                    for slot in range(2):  # one after another: the first migrates the database
                        await workers.start(slot)
                    for kill in range(args.kills):
                        took = await one_takeover(workers, rng.uniform(0, args.max_pause))
                        seconds.append(took)
                        print(f"   kill {kill + 1}: shard 0 connected again after {took:.2f} s")
                finally:
                    await workers.close()
    finally:
        await server.drop_database(database)
    return seconds


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10, help="takeovers to time")
    parser.add_argument("--max-pause", type=float, default=10.0, help="longest wait before a kill")
    parser.add_argument("--seed", type=int, default=1, help="seed of the pauses")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(f"Discord shard takeover: kill -9 of shard 0's worker of two, {args.kills} times")
    server = await asyncio.to_thread(PostgresServer.start)
    try:
        seconds = sorted(await takeovers(server, args))
    finally:
        await asyncio.to_thread(server.stop)
    p95 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.95))]
    print(
        f"   time from kill to shard 0 connected by the other worker: p50 "
        f"{statistics.median(seconds):.2f} s, p95 {p95:.2f} s, worst {seconds[-1]:.2f} s "
        f"(goal p95 <= {GOAL_P95_SECONDS:g} s)"
    )


if __name__ == "__main__":
    asyncio.run(main())
