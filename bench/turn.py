"""What the gateway adds to a turn, how it copes with many chats, and what a turn costs.

1. Gateway-added latency per turn (store, session, prompt, tools, delivery: everything but the
   LLM call) with a zero-latency fake LLM: p50 and p99 over sequential turns.
2. 200 chats each sending one message while the fake LLM takes 1 s per answer, at the default
   concurrency (64): the wall time, against the floor of ceil(200 / 64) = 4 s.
3. Bytes sent to the LLM for a fresh example partner's first turn (system prompt, tool schemas
   and the message), the figure behind "a prompt of 18k tokens for hello".
4. Store round trips per turn in a running session on PostgreSQL (each a statement sent to
   the server; SQLite's hand-offs stay in the process and are not counted), from the
   sequential turns of 1. after each chat's first (a throwaway server, as the tests start
   one; skipped with a note when the machine has none).

The fake LLM runs in a separate process, as a real endpoint would, so its own work does not
count against the gateway.

    .venv/bin/python bench/turn.py
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.llm_process import llm_process  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402
from bot.events import ChatRef, Inbound, Outbound, Sender  # noqa: E402
from tests.postgres_server import PostgresServer, PostgresUnavailable  # noqa: E402

ROOT = str(Path(__file__).resolve().parent.parent)
SEQUENTIAL_TURNS = 400
OPEN_CHATS = 50
"""Chats the sequential turns take turns in: the first turn of each opens its session."""
CHATS = 200
LLM_SECONDS = 1.0


class TimingChannel:
    platform = "bench"
    connected = True

    def __init__(self) -> None:
        self.sent_at: dict[str, float] = {}
        self.done = asyncio.Event()
        self.expected = 0

    async def start(self, receiver: Any) -> None:
        del receiver

    async def stop(self) -> None:
        pass

    def split(self, text: str) -> list[str]:
        return [text]

    async def send(self, message: Outbound) -> str:
        self.sent_at[message.chat.chat_id] = time.perf_counter()
        if len(self.sent_at) >= self.expected:
            self.done.set()
        return "x"

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        del chat, partner_id

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> None:
        del chat, reply_to, partner_id


def config(data_dir: Path, base_url: str, database_url: str | None = None) -> Config:
    storage: dict[str, Any] = {"data_dir": str(data_dir)}
    if database_url is not None:
        storage["database_url"] = database_url
    return Config.model_validate(
        {
            "llm": {"base_url": base_url, "api_key": "x", "model": "m", "max_retries": 0},
            "storage": storage,
            "owner": {"timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
        }
    )


def inbound(chat: str, text: str) -> Inbound:
    return Inbound(
        ChatRef("bench", chat, "dm"),
        Sender("bench", chat, f"user {chat}"),
        f"m{time.perf_counter_ns()}",
        text,
        datetime.now(UTC),
    )


def record_requests(app: Any) -> list[dict[str, Any]]:
    """The request bodies as the gateway hands them to the client (what goes on the wire)."""
    seen: list[dict[str, Any]] = []
    complete: Callable[..., Awaitable[Any]] = app.llm.complete

    async def wrapper(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        seen.append(
            {"model": kwargs.get("model"), "messages": messages, "tools": kwargs.get("tools")}
        )
        return await complete(messages, **kwargs)

    app.llm.complete = wrapper
    return seen


def timed_llm(app: Any) -> list[float]:
    """Record how long each LLM call takes, so it can be subtracted from the turn."""
    spent: list[float] = []
    complete: Callable[..., Awaitable[Any]] = app.llm.complete

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await complete(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    app.llm.complete = wrapper
    return spent


def sent_statements(store: object) -> int:
    """Statements the store sent to its server so far (PostgreSQL counts them; SQLite none)."""
    return int(getattr(store, "round_trips", 0))


async def added_latency(
    tmp: Path, base_url: str, database_url: str | None = None
) -> tuple[float, float, int, float]:
    channel = TimingChannel()
    app = await build_app(config(tmp, base_url, database_url), {"bench": channel})
    await app.start()
    spent = timed_llm(app)
    requests = record_requests(app)
    added: list[float] = []
    first_request_bytes = 0
    trips_before = 0
    for i in range(SEQUENTIAL_TURNS):
        chat = str(i % OPEN_CHATS)
        if i == OPEN_CHATS:
            await app.dispatcher.idle()
            trips_before = sent_statements(app.store)
        channel.sent_at.pop(chat, None)
        channel.expected = len(channel.sent_at) + 1
        channel.done.clear()
        before = len(spent)
        started = time.perf_counter()
        await app.gateway.receive(inbound(chat, f"hello number {i}, how are you today?"))
        await channel.done.wait()
        total = channel.sent_at[chat] - started
        added.append((total - sum(spent[before:])) * 1000)
        if i == 0:
            first_request_bytes = len(json.dumps(requests[0], ensure_ascii=False).encode())
    await app.dispatcher.idle()
    trips = (sent_statements(app.store) - trips_before) / (SEQUENTIAL_TURNS - OPEN_CHATS)
    await app.stop()
    added.sort()
    p99 = added[min(len(added) - 1, int(len(added) * 0.99))]
    return statistics.median(added), p99, first_request_bytes, trips


async def many_chats(tmp: Path, base_url: str) -> float:
    channel = TimingChannel()
    channel.expected = CHATS
    app = await build_app(config(tmp / "b", base_url), {"bench": channel})
    await app.start()
    started = time.perf_counter()
    for i in range(CHATS):
        await app.gateway.receive(inbound(f"c{i}", "hello"))
    await channel.done.wait()
    wall = time.perf_counter() - started
    await app.dispatcher.idle()
    await app.stop()
    return wall


async def on_postgres(tmp: Path, base_url: str) -> None:
    """The sequential turns again with the store on PostgreSQL: its latency and trips."""
    try:
        server = await asyncio.to_thread(PostgresServer.start)
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: not measured ({exc})")
        return
    try:
        database = await server.create_database()
        p50, p99, _, trips = await added_latency(tmp, base_url, server.url(database))
        print(
            f"store round trips per turn in a running session, PostgreSQL: {trips:.1f}"
            f" (goal <= 8); gateway-added latency p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        )
    finally:
        await asyncio.to_thread(server.stop)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with llm_process(0.0) as base_url:
            p50, p99, request_bytes, _ = await added_latency(Path(tmp) / "a", base_url)
            print(
                f"gateway-added latency per turn: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                f"({SEQUENTIAL_TURNS} turns; goal p50 <= 5 ms, p99 <= 20 ms)"
            )
            print(
                f"bytes sent to the LLM for the example partner's first turn: {request_bytes} "
                "(goal <= 6144)"
            )
            await on_postgres(Path(tmp) / "p", base_url)
        async with llm_process(LLM_SECONDS) as base_url:
            wall = await many_chats(Path(tmp), base_url)
            floor = math.ceil(CHATS / 64) * LLM_SECONDS
            print(
                f"{CHATS} chats, 1 message each, LLM {LLM_SECONDS:.0f} s per answer: "
                f"{wall:.2f} s (floor {floor:.0f} s; goal <= 5 s)"
            )


if __name__ == "__main__":
    asyncio.run(main())
