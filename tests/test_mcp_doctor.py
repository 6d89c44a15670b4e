"""``companion doctor`` and ``/admin status`` on MCP servers: one that cannot start is named
with its fix, the largest schemas are named, a running one shows its calls."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.admin_support import admin
from tests.conftest import HarnessFactory, dm
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_doctor import bad, doctor, write_config
from tests.test_mcp_tools import ROOT, call, fake_server, gateway, turn


def server_table(name: str, *flags: str) -> str:
    args = ", ".join(f'"{a}"' for a in ["-m", "tests.fakes.mcp_server", *flags])
    return (
        f'[mcp.servers.{name}]\ncommand = "{sys.executable}"\nargs = [{args}]\n'
        f'cwd = "{ROOT}"\ntimeout_seconds = 20\n'
    )


async def test_doctor_names_a_server_that_cannot_start_and_the_largest_schemas(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    body = server_table("broken", "--exit") + server_table("fake", "--big")
    code, lines = await doctor(write_config(tmp_path, fake_llm.base_url, body), capsys)
    [broken] = [line for line in bad(lines) if "MCP" in line]
    assert broken.startswith("BAD MCP server broken cannot start: it could not start")
    assert "check [mcp.servers.broken]" in broken
    assert code != 0
    text = "\n".join(lines)
    assert "ok  MCP server fake (" in text and "starts: 8 tool(s)" in text
    [largest] = [line for line in lines if "largest MCP tool schemas" in line]
    assert largest.split(": ", 1)[1].startswith("fake__atlas ")
    assert "mcp.max_schema_bytes" in largest


async def test_admin_status_shows_a_failing_server_and_a_running_one(
    harness_factory: HarnessFactory,
) -> None:
    servers = {"broken": fake_server("--exit"), "fake": fake_server(), "idle": fake_server()}
    harness = await gateway(harness_factory, servers, "{mcp: [broken, fake]}")
    await turn(harness, dm(42, "time?"), call("fake__now"), Reply("soon"))
    status = await admin(harness, "/admin status")
    assert "MCP servers:" in status
    assert "broken: NOT AVAILABLE — it could not start" in status
    assert "fake: running, 1 call(s)" in status
    assert "idle: not started yet" in status


async def test_admin_tools_lists_each_servers_tools_and_who_may_use_them(
    harness_factory: HarnessFactory,
) -> None:
    servers = {
        "fake": fake_server(tools={"crash": {"confirm": True}}),
        "mine": fake_server(owner_only=True),
    }
    harness = await gateway(harness_factory, servers, "{mcp: [fake, mine.now], deny: ['*hang']}")
    listing = (await admin(harness, "/admin tools example")).replace("\\_", "_")  # literal
    assert "fake: 7 tool(s)" in listing and "mine (owner only: your own direct chats)" in listing
    assert "fake__now: Mira" in listing and "fake__hang: no partner" in listing
    assert "fake__crash: Mira (asks the person first: confirm = true)" in listing
    assert "mine__now: Mira" in listing and "mine__echo: no partner" in listing
    assert "no partner nobody" in await admin(harness, "/admin tools nobody")


async def test_admin_usage_counts_tool_calls_per_server(harness_factory: HarnessFactory) -> None:
    harness = await gateway(harness_factory, {"fake": fake_server()}, "{mcp: [fake]}")
    await turn(harness, dm(42, "time?"), call("fake__now"), Reply("soon"))
    await turn(harness, dm(42, "again?"), call("fake__echo", text="a"), Reply("ok"))
    assert "MCP tool calls: fake 2" in await admin(harness, "/admin usage")
