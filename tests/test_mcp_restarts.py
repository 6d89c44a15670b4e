"""MCP servers that went away between two turns: a program killed while no call was waiting,
an HTTP server started again that no longer knows the gateway's session. The next call finds
the server started again (with the backoff) and the turn answers with the tool's result,
never with an error about the dead session."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import HarnessFactory, dm
from tests.fakes.fake_llm import Reply
from tests.fakes.mcp_server import CLOCK, http_server
from tests.test_mcp_tools import call, gateway, tool_results, turn

TIME_SERVER = {"command": sys.executable, "args": ["-m", "mcp_server_time"], "timeout_seconds": 20}


def programs(module: str) -> list[int]:
    """The processes this test process started that run ``python -m module``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and module.encode() in command:
            found.append(int(entry.name))
    return found


async def until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait for state that has no event of its own (a server noticed gone)."""
    try:
        async with asyncio.timeout(timeout):
            while not condition():  # noqa: ASYNC110 - no event to wait on
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout:g}s waiting for {what}") from None


async def test_a_time_server_killed_between_turns_is_started_again_at_the_next_call(
    harness_factory: HarnessFactory,
) -> None:
    harness = await gateway(harness_factory, {"time": TIME_SERVER}, "{mcp: [time]}")
    ask = call("time__get_current_time", timezone="UTC")
    first = await turn(harness, dm(42, "time?"), ask, Reply("it is now"))
    assert '"timezone": "UTC"' in tool_results(first[1])[0]
    [pid] = programs("mcp_server_time")
    os.kill(pid, signal.SIGKILL)
    assert harness.app.mcp is not None
    [server] = harness.app.mcp.made()
    await until(lambda: not server.running, "the gateway to notice the server is gone")
    assert server.last_error == "it stopped while no call was waiting"
    second = await turn(harness, dm(42, "and now?"), ask, Reply("still now"))
    [result] = tool_results(second[1])
    assert '"timezone": "UTC"' in result and '"datetime"' in result, result
    assert harness.channel.sent[-1].text == "still now"
    assert programs("mcp_server_time") not in ([], [pid])  # a new program answered
    assert server.running


async def test_an_http_server_started_again_gets_a_new_session_at_the_next_call(
    harness_factory: HarnessFactory,
) -> None:
    headers = {"Authorization": "Bearer s3cret"}
    async with http_server("s3cret") as before:
        server = {"url": before.url, "headers": headers, "timeout_seconds": 10}
        harness = await gateway(harness_factory, {"web": server}, "{mcp: [web.now]}")
        first = await turn(harness, dm(42, "time?"), call("web__now"), Reply("soon"))
        assert tool_results(first[1])[0].endswith(CLOCK)
    port = int(before.url.split(":")[2].split("/")[0])
    async with http_server("s3cret", port=port) as after:
        second = await turn(harness, dm(42, "again?"), call("web__now"), Reply("later"))
        [result] = tool_results(second[1])
        assert result.endswith(CLOCK), result
        assert harness.channel.sent[-1].text == "later"
        assert after.requests > 0
        await harness.app.stop()  # the session ends while its server still listens
