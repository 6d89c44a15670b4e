"""The gateway as its owner runs it: ``python -m bot.cli.main --config <file> run`` in a child
process.

The fakes (Telegram, Discord, the LLM) run inside the test's own event loop on 127.0.0.1 and
the child reaches them through its config file, like a self-hosted Bot API server or a local
model endpoint. The child's whole output (log lines on stderr, anything on stdout) is read
line by line while it runs, kept in :attr:`GatewayProcess.lines` and copied to a log file next
to the data directory, so a test can wait for a line, grep the output for secrets or errors,
and a failing run leaves its log behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
COMPANION = [sys.executable, "-m", "bot.cli.main"]
READY_LINE = "gateway running on"
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 60.0
LOG_LINE_LIMIT_BYTES = 4 * 1024 * 1024

T = TypeVar("T")


def toml_value(value: Any) -> str:
    """A Python value as TOML (strings as JSON strings: TOML basic strings read them alike)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def write_config(path: Path, sections: dict[str, Any]) -> Path:
    """Write ``{"llm": {...}, "bindings": [{...}], ...}`` as a config.toml."""
    lines: list[str] = []
    for name, body in sections.items():
        if isinstance(body, list):
            for table in body:
                lines.append(f"[[{name}]]")
                lines += [f"{key} = {toml_value(value)}" for key, value in table.items()]
            continue
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml_value(value)}" for key, value in body.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _limit_file_size(limit_bytes: int) -> Callable[[], None]:
    """For ``preexec_fn``: the child may not write any file past ``limit_bytes`` (a full disk;
    CI runs as root, so a read-only directory would not stop it). Python ignores SIGXFSZ, so
    an oversized write fails with EFBIG instead of killing the process."""

    def apply() -> None:
        # soft limit only: a test may lower and lift it later (prlimit) without privileges
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.RLIM_INFINITY))

    return apply


class GatewayProcess:
    """One ``companion run`` child; every instance is killed by the fixture's teardown."""

    def __init__(self, process: asyncio.subprocess.Process, log_path: Path) -> None:
        self.process = process
        self.log_path = log_path
        self.lines: list[str] = []
        self._changed = asyncio.Event()
        self._log = log_path.open("a", encoding="utf-8")
        self._reader = asyncio.create_task(self._read_output(), name="gateway output")

    @classmethod
    async def start(
        cls,
        config: Path,
        log_path: Path,
        *,
        file_size_limit: int | None = None,
        extra_env: dict[str, str] | None = None,
        options: tuple[str, ...] = (),
    ) -> GatewayProcess:
        """``options`` go before the ``run`` command (``-vv`` logs at DEBUG level)."""
        # The child reads its secrets from the config file only: no key from the environment.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "COMPANION_"))}
        env.update(extra_env or {})
        process = await asyncio.create_subprocess_exec(
            *COMPANION,
            "--config",
            str(config),
            *options,
            "run",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=ROOT,
            env=env,
            limit=LOG_LINE_LIMIT_BYTES,
            preexec_fn=_limit_file_size(file_size_limit) if file_size_limit else None,
        )
        return cls(process, log_path)

    # ---- output ----------------------------------------------------------------------

    async def _read_output(self) -> None:
        assert self.process.stdout is not None
        try:
            async for raw in self.process.stdout:
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                self.lines.append(line)
                self._log.write(line + "\n")
                self._notify()
        finally:
            self._log.flush()
            self._notify()

    def _notify(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def tail(self, count: int = 30) -> str:
        return "\n".join(self.lines[-count:]) or "(no output)"

    async def wait_until(self, condition: Callable[[], T | None], timeout: float, what: str) -> T:
        """Wait for ``condition()`` to hold, checked on every output line and every 50 ms
        (for conditions on files or the fakes); fails early if the child exits."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if self.process.returncode is not None and self._reader.done():
                raise AssertionError(
                    f"gateway exited ({self.process.returncode}) while waiting for {what}:\n"
                    + self.tail()
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out after {timeout:g}s waiting for {what}:\n{self.tail()}"
                )
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 0.05)):
                    await self._changed.wait()

    async def wait_for_line(self, text: str, timeout: float = 30.0, since: int = 0) -> str:
        def find() -> str | None:
            return next((line for line in self.lines[since:] if text in line), None)

        return await self.wait_until(find, timeout, f"a log line with {text!r}")

    async def wait_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        await self.wait_for_line(READY_LINE, timeout)

    def errors(self) -> list[str]:
        """Log lines at ERROR or CRITICAL level, and tracebacks."""
        return [
            line
            for line in self.lines
            if " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback")
        ]

    # ---- the process -----------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def status(self, field: str) -> int:
        """A number from /proc/<pid>/status (VmRSS and VmHWM in KiB, Threads)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name == field:
                return int(value.split()[0])
        raise KeyError(field)

    def rss_kib(self) -> int:
        return self.status("VmRSS")

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    async def kill(self) -> None:
        """kill -9: no handler runs, nothing is flushed or closed."""
        if self.running:
            self.process.send_signal(signal.SIGKILL)
        await self.wait()

    async def terminate(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        """SIGTERM, as a service manager stops it; returns the exit status."""
        if self.running:
            self.process.send_signal(signal.SIGTERM)
        return await self.wait(timeout)

    async def wait(self, timeout: float = STOP_TIMEOUT_SECONDS) -> int:
        try:
            code = await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"gateway did not exit within {timeout:g}s:\n{self.tail()}"
            ) from None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reader), 10)
        return code

    async def close(self) -> None:
        """Teardown: make sure the child is gone and its output is on disk."""
        if self.running:
            self.process.send_signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(self.process.wait(), 30)
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        self._log.close()
