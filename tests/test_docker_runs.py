"""Runs as a container makes them: the config named by COMPANION_CONFIG, no terminal on stdin.

Each problem stops start-up with exit status 2 and one line on stderr that names the fix —
never a traceback, and never exit 0 (which a restart policy would turn into a silent loop).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.fake_llm import FakeLLM, Reply

COMPANION = [sys.executable, "-m", "bot.cli.main"]
ROOT = Path(__file__).parent.parent
TIMEOUT_SECONDS = 60.0


async def run_companion(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> tuple[int, str, str]:
    """``companion ARGS`` with stdin from /dev/null (as ``docker run -d``) unless given."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "COMPANION_"))}
    process = await asyncio.create_subprocess_exec(
        *COMPANION,
        *args,
        stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env={**base, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), TIMEOUT_SECONDS)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def console_config(tmp_path: Path, llm_url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "{llm_url}"\nmodel = "fake-model"\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n',
        encoding="utf-8",
    )
    return path


async def test_a_missing_config_file_named_by_companion_config_stops_start_up(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "config.toml"
    code, _, err = await run_companion("run", env={"COMPANION_CONFIG": str(missing)})
    assert code == 2
    line = one_line(err)
    assert str(missing) in line and "COMPANION_CONFIG" in line and "companion setup" in line


async def test_a_directory_mounted_as_the_config_stops_start_up(tmp_path: Path) -> None:
    mounted = tmp_path / "config.toml"
    mounted.mkdir()
    code, _, err = await run_companion("run", env={"COMPANION_CONFIG": str(mounted)})
    assert code == 2
    line = one_line(err)
    assert "is a directory" in line and "mount the config.toml file itself" in line


async def test_no_chat_token_and_no_terminal_exits_non_zero_naming_the_fix(
    tmp_path: Path,
) -> None:
    async with FakeLLM() as llm:
        config = console_config(tmp_path, llm.base_url)
        code, out, err = await run_companion("run", env={"COMPANION_CONFIG": str(config)})
    assert code == 2, out + err
    line = one_line(err)
    assert "telegram.token" in line and "discord.token" in line
    assert "docker run -it" in line


async def test_piped_input_still_reaches_the_console_without_a_chat_token(
    tmp_path: Path,
) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(text="Hello from the pipe."))
        config = console_config(tmp_path, llm.base_url)
        code, out, err = await run_companion(
            "run", env={"COMPANION_CONFIG": str(config)}, stdin=b"hi\n"
        )
    assert code == 0, err
    assert "Mira: Hello from the pipe." in out
