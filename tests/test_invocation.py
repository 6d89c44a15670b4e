"""Every command a hint prints works as printed in a fresh shell: a checkout's `companion` lives
in .venv/bin, which no shell has on its PATH, so the hints name it by its path there, by
`make …` under make, and plainly only when PATH finds this very program."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from bot.cli.invocation import command, program
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM

WORKTREE = Path(__file__).resolve().parents[1]
VENV = Path(sys.executable).parent.parent
FRESH_PATH = "/usr/bin:/bin"  # a new shell's PATH: no virtual environment on it


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout whose .venv holds the `companion` script that is running now."""
    script = tmp_path / ".venv" / "bin" / "companion"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/companion", "setup"])
    return script


@pytest.mark.usefixtures("checkout")
def test_a_checkout_names_its_venv_script_when_path_does_not_find_it() -> None:
    env = {"PATH": FRESH_PATH}
    assert program(env) == ".venv/bin/companion"
    assert command("doctor", environ=env) == ".venv/bin/companion doctor"
    assert command("run", "my.toml", env) == ".venv/bin/companion --config my.toml run"


def test_plain_companion_only_when_path_finds_this_program(checkout: Path, tmp_path: Path) -> None:
    assert program({"PATH": f"{checkout.parent}:{FRESH_PATH}"}) == "companion"
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "companion").write_text("#!/bin/sh\n", encoding="utf-8")
    (other / "companion").chmod(0o755)
    assert program({"PATH": f"{other}:{FRESH_PATH}"}) == ".venv/bin/companion"


@pytest.mark.usefixtures("checkout")
def test_under_make_the_make_targets_are_named() -> None:
    env = {"PATH": FRESH_PATH, "MAKELEVEL": "1"}
    assert command("run", environ=env) == "make run"
    assert command("doctor", environ=env) == ".venv/bin/companion doctor"
    assert command("run", "other.toml", env) == ".venv/bin/companion --config other.toml run"


async def shell(line: str, cwd: Path, *args: str) -> tuple[int, str]:
    """``line`` run by a new shell that has only the system's PATH."""
    env = {"PATH": FRESH_PATH, "HOME": str(cwd), "PYTHONPATH": str(WORKTREE)}
    process = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", line, *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    async with asyncio.timeout(120):
        out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def test_setup_from_a_checkout_prints_next_commands_that_run_in_a_fresh_shell(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    (tmp_path / ".venv").symlink_to(VENV)
    setup = f".venv/bin/companion setup --llm-base-url {fake_llm.base_url} --model {FAKE_MODEL_ID}"
    code, out = await shell(setup, tmp_path)
    assert code == 0, out
    [next_line] = [line for line in out.splitlines() if line.startswith("Next:")]
    printed = re.findall(r"`([^`]+)`", next_line)
    assert printed == [".venv/bin/companion run", ".venv/bin/companion doctor"], next_line
    code, out = await shell(printed[1], tmp_path)
    assert code == 0, out
    assert f"answers with model {FAKE_MODEL_ID}" in out
