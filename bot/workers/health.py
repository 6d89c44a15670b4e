"""The status file a running gateway keeps fresh, and the health check that reads it.

``companion run`` rewrites ``<data_dir>/status.json`` every :data:`STATUS_INTERVAL_SECONDS`
with its pid, the time and whether each channel is connected. ``companion health`` (a
container's HEALTHCHECK) passes only if that file is fresh, its process is alive and every
channel is connected. It never calls the LLM provider: a provider outage is the gateway's to
apologise for, not a reason to restart the container.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STATUS_FILE = "status.json"
STATUS_INTERVAL_SECONDS = 30.0
STALE_AFTER_SECONDS = 3 * STATUS_INTERVAL_SECONDS
"""A file older than three rounds means the process hangs or is gone."""


@dataclass(frozen=True)
class Health:
    healthy: bool
    summary: str


def status_path(data_dir: Path) -> Path:
    return data_dir / STATUS_FILE


def write_status(data_dir: Path, channels: Mapping[str, bool]) -> None:
    """Replace the status file atomically, so a reader never sees half of it."""
    path = status_path(data_dir)
    record = {"pid": os.getpid(), "time": time.time(), "channels": dict(channels)}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record), encoding="utf-8")
    os.replace(temporary, path)


def remove_status(data_dir: Path) -> None:
    status_path(data_dir).unlink(missing_ok=True)


def check_health(data_dir: Path, now: float | None = None) -> Health:
    """Read the status file and say whether the gateway is alive and connected."""
    path = status_path(data_dir)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        written, pid, channels = float(record["time"]), int(record["pid"]), record["channels"]
    except FileNotFoundError:
        return Health(False, f"{path} does not exist: the gateway is not running")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return Health(False, f"{path} cannot be read ({exc})")
    age = (time.time() if now is None else now) - written
    if age > STALE_AFTER_SECONDS:
        return Health(False, f"status is {age:.0f} s old: the gateway stopped updating it")
    if not _alive(pid):
        return Health(False, f"process {pid} that wrote the status is gone")
    down = sorted(name for name, up in channels.items() if not up)
    if down:
        return Health(False, f"not connected: {', '.join(down)}")
    names = ", ".join(sorted(channels)) or "no channels"
    return Health(True, f"ok: {names} connected (status {age:.0f} s old)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True
