"""What MCP tools cost a turn.

1. Gateway-added time of a turn with one MCP tool call (the test server's ``now`` over stdio)
   against the same turn with one memory tool call (``partner_read``): the turn's time from
   the message to its reply, less the model's calls, and for the MCP turn less the call's round
   trip to the server as well (the server's own time, and the pipe to it); p50 over
   sequential turns, the round trip shown beside it. Goal: the MCP turn at most 1.5 times the
   memory turn.
2. Bytes sent to the model on a partner's first turn with 0, 1 and 5 servers named in its
   preset.yml (the same test server under five names: 35 tools, held to ``mcp.max_tools`` and
   ``mcp.max_schema_bytes``).
3. The gateway process's peak RSS after start and a few turns with five servers configured
   but named by no partner, against none configured (each in a fresh process), and the
   programs it started (goal: the same RSS within noise, no program started).

The fake LLM runs in a separate process, as a real endpoint would.

    .venv/bin/python bench/tools.py
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.turn import TimingChannel, inbound, record_requests, timed_llm  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config.model import Config  # noqa: E402

ROOT = str(Path(__file__).resolve().parent.parent)
TURNS = 200
RSS_TURNS = 20
SERVER_NAMES = ("fake", "two", "three", "four", "five")
TOOL_LLM = """
import asyncio, sys
sys.path.insert(0, {root!r})
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCallSpec

def answer(request):
    last = request["messages"][-1]
    if last["role"] == "tool" or "tools" not in request:
        return Reply(text="ok")
    tool = str(last["content"]).split()[-1]
    return Reply(tool_calls=[ToolCallSpec(tool, {{}})]) if tool != "none" else Reply(text="ok")

async def main():
    async with FakeLLM(answer) as llm:
        print(llm.base_url, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


@contextlib.asynccontextmanager
async def tool_llm() -> AsyncIterator[str]:
    """A fake model that calls the tool named by the message's last word, then answers."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", TOOL_LLM.format(root=ROOT), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    try:
        yield (await process.stdout.readline()).decode().strip()
    finally:
        process.kill()
        await process.wait()


def with_servers(data_dir: Path, base_url: str, names: tuple[str, ...]) -> Config:
    """bench/turn.py's gateway, with these names for the test server in ``[mcp]``."""
    server = {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "cwd": ROOT}
    return Config.model_validate(
        {
            "llm": {"base_url": base_url, "api_key": "x", "model": "m", "max_retries": 0},
            "storage": {"data_dir": str(data_dir)},
            "owner": {"timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
            "mcp": {"servers": {name: server for name in names}},
        }
    )


def name_servers(app: Any, names: tuple[str, ...]) -> None:
    """The example partner's preset.yml names these servers."""
    preset = app.catalog.require("example").dir / "preset.yml"
    preset.write_text(preset.read_text() + f"tools: {{mcp: [{', '.join(names)}]}}\n")
    app.catalog.reload()


def timed_mcp(app: Any) -> list[float]:
    """How long each MCP call's round trip to its server takes."""
    spent: list[float] = []
    for server in filter(None, map(app.mcp.get, app.mcp.names)):
        call: Callable[..., Awaitable[Any]] = server.call

        async def wrapper(*args: Any, _call: Any = call, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await _call(*args, **kwargs)
            finally:
                spent.append(time.perf_counter() - started)

        server.call = wrapper
    return spent


async def turns(app: Any, channel: TimingChannel, tool: str) -> tuple[float, float]:
    """p50 of the gateway-added ms of sequential turns calling ``tool``, and of MCP trips."""
    llm, mcp = timed_llm(app), timed_mcp(app)
    added, trips = [], []
    for i in range(TURNS + 5):
        chat = str(i % 10)
        channel.sent_at.pop(chat, None)
        channel.expected = len(channel.sent_at) + 1
        channel.done.clear()
        llm_before, mcp_before = len(llm), len(mcp)
        started = time.perf_counter()
        await app.gateway.receive(inbound(chat, f"please use {tool}"))
        await channel.done.wait()
        total = channel.sent_at[chat] - started
        trip = sum(mcp[mcp_before:])
        if i >= 5:  # the first turns start the server and open the sessions
            added.append((total - sum(llm[llm_before:]) - trip) * 1000)
            trips.append(trip * 1000)
    await app.dispatcher.idle()
    return statistics.median(added), statistics.median(trips)


async def added_time(tmp: Path, base_url: str) -> None:
    results = {}
    for tool in ("partner_read", "fake__now"):
        channel = TimingChannel()
        app = await build_app(with_servers(tmp / tool, base_url, ("fake",)), {"bench": channel})
        await app.start()
        name_servers(app, ("fake",))
        results[tool] = await turns(app, channel, tool)
        await app.stop()
    memory, _ = results["partner_read"]
    mcp, trip = results["fake__now"]
    print(
        f"gateway-added time of a turn with one tool call, p50 over {TURNS}: memory tool "
        f"{memory:.2f} ms, MCP tool {mcp:.2f} ms ({mcp / memory:.2f}x; goal <= 1.5x), the MCP "
        f"round trip to the server (excluded) {trip:.2f} ms"
    )


async def request_bytes(tmp: Path, base_url: str) -> None:
    sizes = []
    for count in (0, 1, 5):
        names = SERVER_NAMES[:count]
        channel = TimingChannel()
        app = await build_app(
            with_servers(tmp / f"b{count}", base_url, SERVER_NAMES), {"bench": channel}
        )
        await app.start()
        if names:
            name_servers(app, names)
        seen = record_requests(app)
        channel.expected = 1
        await app.gateway.receive(inbound("1", "hello none"))
        await channel.done.wait()
        await app.dispatcher.idle()
        tools = len(seen[0]["tools"] or [])
        sizes.append(f"{count}: {len(json.dumps(seen[0]).encode())} B ({tools} tools)")
        await app.stop()
    print("bytes of a partner's first request by servers named: " + ", ".join(sizes))


def peak_rss_kb() -> int:
    """This process's peak RSS since its exec (VmHWM: getrusage's maximum carries over a fork
    from the parent, which measured the other figures with the SDK loaded)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def children() -> int:
    """Programs this process started that are still running."""
    path = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    return len(path.read_text().split()) if path.exists() else -1


async def idle_rss(configured: int) -> None:
    """Run in a fresh process: start a gateway with ``configured`` servers none names, answer
    a few turns, print the peak RSS (KB) and the programs started."""
    with tempfile.TemporaryDirectory() as tmp:
        async with tool_llm() as base_url:
            before = children()
            channel = TimingChannel()
            names = SERVER_NAMES[:configured]
            app = await build_app(with_servers(Path(tmp), base_url, names), {"bench": channel})
            await app.start()
            for i in range(RSS_TURNS):
                channel.expected = i + 1
                channel.done.clear()
                await app.gateway.receive(inbound(str(i), "hello none"))
                await channel.done.wait()
            await app.dispatcher.idle()
            started = children() - before
            print(peak_rss_kb(), started)
            await app.stop()


async def rss_compare() -> None:
    figures = {}
    for configured in (0, 5):
        process = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "--rss", str(configured), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
        rss, started = out.decode().split()[-2:]
        figures[configured] = (int(rss) / 1024, int(started))
    none, five = figures[0], figures[5]
    print(
        f"peak RSS after start and {RSS_TURNS} turns: no servers {none[0]:.1f} MB, five "
        f"configured but unused {five[0]:.1f} MB; programs started: {none[1]} and {five[1]}"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with tool_llm() as base_url:
            await added_time(Path(tmp), base_url)
            await request_bytes(Path(tmp), base_url)
    await rss_compare()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rss"]:
        asyncio.run(idle_rss(int(sys.argv[2])))
    else:
        asyncio.run(main())
