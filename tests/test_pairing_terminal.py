"""Pairing decided at the terminal: `companion pairing list | approve | deny` beside a running
gateway (the database is shared), the approved user told at once, and a request that arrives
while nobody owns the bot shown on the terminal, not only logged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.cli.main import main
from tests.conftest import OWNER_ID, Harness, RecordingChannel, dm, make_config
from tests.fakes.fake_llm import FakeLLM, Reply

STRANGER = 77


def config_file(tmp_path: Path) -> Path:
    """The same data directory as the harness's, for the terminal commands."""
    path = tmp_path / "config.toml"
    path.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    return path


async def companion(tmp_path: Path, *args: str) -> int:
    """``companion ARGS`` as the owner types it in another terminal (its own event loop)."""
    return await asyncio.to_thread(main, ["--config", str(config_file(tmp_path)), *args])


async def pairing_code(harness: Harness) -> str:
    await harness.send(dm(STRANGER, "hello?", name="Stranger"))
    await harness.settle()
    [request] = await harness.app.store.live_pairings()
    return str(request["code"])


async def test_pairing_list_shows_each_waiting_request(
    harness_factory: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness = await harness_factory(access={"dm_policy": "pairing"})
    code = await pairing_code(harness)
    capsys.readouterr()
    assert await companion(tmp_path, "pairing", "list") == 0
    out = capsys.readouterr().out
    assert code in out and "Stranger" in out and f"test:{STRANGER}" in out


async def test_approving_at_the_terminal_lets_the_user_in_and_tells_them(
    harness_factory: Callable[..., Any], tmp_path: Path, fake_llm: FakeLLM
) -> None:
    harness = await harness_factory(access={"dm_policy": "pairing"})
    code = await pairing_code(harness)
    before = len(harness.channel.texts(str(STRANGER)))
    assert await companion(tmp_path, "pairing", "approve", code.lower()) == 0
    await harness.channel.wait_sent(len(harness.channel.sent) + 1, timeout=15)
    told = harness.channel.texts(str(STRANGER))[before:]
    assert told == ["You're in! The owner approved you. Say hello."]
    [row] = await harness.app.store.audit_rows("pairing approve")
    assert row["actor"] == "terminal" and row["detail"]["user"] == f"test:{STRANGER}"
    fake_llm.script(Reply(text="Welcome!"))
    await harness.send(dm(STRANGER, "thanks"))
    await harness.settle()
    assert harness.channel.texts(str(STRANGER))[-1] == "Welcome!"


async def test_an_approval_in_chat_is_told_once(harness_factory: Callable[..., Any]) -> None:
    harness = await harness_factory(access={"dm_policy": "pairing"})
    code = await pairing_code(harness)
    await harness.send(dm(OWNER_ID, f"/admin approve {code}", name="Owner"))
    await harness.settle()
    await harness.app.gateway.announce_approvals()  # what the terminal poller would do
    welcomes = [t for t in harness.channel.texts(str(STRANGER)) if "You're in" in t]
    assert len(welcomes) == 1


async def test_denying_at_the_terminal_keeps_the_user_out(
    harness_factory: Callable[..., Any], tmp_path: Path, fake_llm: FakeLLM
) -> None:
    harness = await harness_factory(access={"dm_policy": "pairing"})
    code = await pairing_code(harness)
    assert await companion(tmp_path, "pairing", "deny", code) == 0
    assert (await harness.app.store.pairing(code))["status"] == "denied"  # type: ignore[index]
    await harness.send(dm(STRANGER, "please?"))
    await harness.settle()
    assert fake_llm.requests == []


async def test_an_unknown_code_is_named_with_where_to_look(
    harness_factory: Callable[..., Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await harness_factory(access={"dm_policy": "pairing"})
    assert await companion(tmp_path, "pairing", "approve", "NOPE99") == 2
    err = capsys.readouterr().err
    assert "NOPE99" in err and "companion pairing list" in err


@pytest.fixture
async def unowned(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[tuple[App, list[str]]]:
    """A gateway with nobody owning its platform; what it shows on the terminal."""
    shown: list[str] = []
    config = make_config(tmp_path / "data", fake_llm.base_url, access={"dm_policy": "pairing"})
    app = await build_app(config, {"test": RecordingChannel()}, shown.extend)
    await app.start()
    yield app, shown
    await app.stop()


async def test_a_pairing_request_with_no_owner_is_shown_on_the_terminal(
    unowned: tuple[App, list[str]],
) -> None:
    app, shown = unowned
    await app.gateway.receive(dm(STRANGER, "hello?", name="Stranger\x1b[2J"))
    [request] = await app.store.live_pairings()
    notice = "\n".join(shown)
    assert "PAIRING REQUEST" in notice and "Stranger?[2J" in notice and "\x1b" not in notice
    assert f"companion pairing approve {request['code']}" in notice
