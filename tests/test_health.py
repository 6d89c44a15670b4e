"""`companion health`: the container healthcheck reads the status file the gateway keeps fresh
and never asks the LLM provider."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.workers.health import STALE_AFTER_SECONDS, check_health, write_status


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    # an LLM address nothing listens on: the check must not depend on it
    path.write_text(
        f'[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "x"\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n',
        encoding="utf-8",
    )
    (tmp_path / "data").mkdir()
    return path


def write(tmp_path: Path, *, age: float = 0.0, pid: int | None = None, **channels: bool) -> None:
    record = {"pid": pid or os.getpid(), "time": time.time() - age, "channels": channels}
    (tmp_path / "data" / "status.json").write_text(json.dumps(record), encoding="utf-8")


def test_fresh_status_with_every_channel_connected_is_healthy(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, discord=True, telegram=True)
    assert main(["--config", str(config), "health"]) == 0
    assert "discord, telegram connected" in capsys.readouterr().out


def test_a_disconnected_channel_is_unhealthy(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, discord=False, telegram=True)
    assert main(["--config", str(config), "health"]) == 1
    assert "not connected: discord" in capsys.readouterr().out


def test_a_stale_status_is_unhealthy(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, age=STALE_AFTER_SECONDS + 5, discord=True)
    assert main(["--config", str(config), "health"]) == 1
    assert "stopped updating" in capsys.readouterr().out


def test_no_status_file_means_not_running(config: Path) -> None:
    assert main(["--config", str(config), "health"]) == 1


def test_a_status_left_by_a_dead_process_is_unhealthy(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    write(tmp_path, pid=2**22 + 12345, discord=True)  # above Linux's pid limit: never alive
    health = check_health(tmp_path / "data")
    assert not health.healthy and "is gone" in health.summary


def test_written_status_reads_back_healthy(tmp_path: Path) -> None:
    write_status(tmp_path, {"console": True})
    assert check_health(tmp_path).healthy
