"""`make run` (and `companion run`, `companion chat`) on a fresh clone, before any config.toml:
at a terminal it starts setup's questions and then goes on as asked, so a new owner without a
bot token is talking to a partner at once; where nobody can type it says in one line what to
run, and exits non-zero — never "opening the console" followed by an LLM error."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from bot.cli.main import main
from tests.fakes.fake_llm import FakeLLM, Reply

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory without config.toml, and nothing in the environment that configures us."""
    for name in ("OPENAI_API_KEY", "COMPANION_CONFIG", "MAKELEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.mark.parametrize("subcommand", ["run", "chat"])
def test_where_nobody_can_type_one_line_names_make_setup(
    subcommand: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MAKELEVEL", "1")  # as `make run` starts it
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main([subcommand]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["companion: no config.toml: run `make setup`"], err


def test_outside_make_the_line_names_a_setup_command_that_exists(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("hello\n"))  # a pipe is nobody typing
    assert main(["run"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    program = line.split("`")[1].removesuffix(" setup")
    assert line.startswith("companion: no config.toml: run `") and line.endswith(" setup`")
    assert program == "companion" or os.access(program, os.X_OK), line


def test_a_config_from_the_environment_alone_is_not_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A container configured by COMPANION_* variables goes on to its own checks."""
    monkeypatch.setenv("COMPANION_LLM__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("COMPANION_STORAGE__DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    assert "no config.toml" not in err and "(docker run -it)" in err


async def test_at_a_terminal_setup_asks_its_first_question(fresh_clone: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "bot.cli.main", "run"],
        cwd=str(fresh_clone),
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    try:
        await child.expect_exact("No config.toml yet: starting", async_=True)
        await child.expect_exact("LLM endpoint (OpenAI-compatible base URL)", async_=True)
        assert "opening the console" not in str(child.before)
        child.sendeof()
        await child.expect(pexpect.EOF, async_=True)
    finally:
        child.close(force=True)
    assert child.exitstatus == 2  # the input ended: setup says which flags to pass instead
    assert not (fresh_clone / "config.toml").exists()


async def test_at_a_terminal_run_goes_on_from_setup_to_a_conversation(fresh_clone: Path) -> None:
    """No token given: setup's answers, then the console, then the partner's reply, in one
    command; the web page's login is said to come from the console, not from a bot."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"  # a pseudo-terminal does not answer its requests
    async with FakeLLM(lambda _request: Reply(text="Hello, I am Mira.")) as llm:
        child = pexpect.spawn(
            sys.executable,
            ["-m", "bot.cli.main", "run"],
            cwd=str(fresh_clone),
            env=env,
            encoding="utf-8",
            timeout=30,
        )
        try:
            await child.expect_exact("LLM endpoint (OpenAI-compatible base URL)", async_=True)
            child.sendline(llm.base_url)
            for question in ("Model", "Telegram bot token", "Discord bot token", "web page"):
                await child.expect_exact(question, async_=True)
                child.sendline("y" if question == "web page" else "")
            await child.expect_exact("send /admin web in the console once it runs", async_=True)
            last = ["local embedder", "Starting the gateway"]  # asked if its extra is installed
            if await child.expect_exact(last, async_=True) == 0:
                child.sendline("")
            await child.expect_exact("opening the console", async_=True)
            await child.expect_exact("you>", async_=True)
            child.sendline("Hi Mira")
            await child.expect_exact("Hello, I am Mira.", async_=True)
            await child.expect_exact("you>", async_=True)
            child.sendcontrol("d")
            await child.expect(pexpect.EOF, async_=True)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    assert (fresh_clone / "config.toml").exists()
    assert llm.last_user_text().endswith("Hi Mira")
