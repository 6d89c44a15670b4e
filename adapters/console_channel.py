"""The console channel: talk to a partner in the terminal, as the owner.

Each line typed is one message through the same gateway, dispatcher and chat loop as Telegram
or Discord; the reply is printed as ``Name: text``. While the model works a small spinner runs
on stderr (only when stderr is a terminal, so piped output stays clean). The channel waits for
each reply before reading the next line, and reports end of input through :attr:`finished`.
Files a reply carries are saved in the exports directory, never over a different file already
there: the owner may be editing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from adapters.base import Receiver
from bot.events import ChatRef, Inbound, Outbound, Sender
from bot.literal import unescape

CONSOLE_CHAT = ChatRef("console", "console", "dm", title="console")
CONSOLE_USER = Sender("console", "console", "you")
SPINNER_SECONDS = 0.12
REPLY_TIMEOUT_SECONDS = 900.0


class ConsoleChannel:
    platform = "console"

    def __init__(
        self,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        exports: Path = Path("data/exports"),
    ) -> None:
        self.exports = exports
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._interactive = self._in.isatty()
        self._show_spinner = sys.stderr.isatty()
        self._replied = asyncio.Event()
        self._spinner: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self.finished = asyncio.Event()

    @property
    def connected(self) -> bool:
        """The terminal is "connected" while input is being read."""
        return self._reader is not None and not self._reader.done()

    async def start(self, receiver: Receiver) -> None:
        self._reader = asyncio.create_task(self._read_loop(receiver), name="console input")

    async def stop(self) -> None:
        self._stop_spinner()
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    def _start_reader_thread(self) -> asyncio.Queue[str]:
        """Read stdin on a daemon thread: a blocked readline must never hold up exit."""
        loop = asyncio.get_running_loop()
        lines: asyncio.Queue[str] = asyncio.Queue()

        def pump() -> None:
            while True:
                line = self._in.readline()
                loop.call_soon_threadsafe(lines.put_nowait, line)
                if not line:
                    return

        threading.Thread(target=pump, name="console stdin", daemon=True).start()
        return lines

    async def _read_loop(self, receiver: Receiver) -> None:
        lines = self._start_reader_thread()
        try:
            while True:
                if self._interactive:
                    self._write("you> ", newline=False)
                line = await lines.get()
                if not line:
                    break
                text = line.strip()
                if not text:
                    continue
                self._replied.clear()
                await receiver.receive(
                    Inbound(
                        CONSOLE_CHAT, CONSOLE_USER, str(time.time_ns()), text, datetime.now(UTC)
                    )
                )
                await asyncio.wait_for(self._replied.wait(), REPLY_TIMEOUT_SECONDS)
        finally:
            self.finished.set()

    def split(self, text: str) -> list[str]:
        return [text]

    async def send(self, message: Outbound) -> str | None:
        self._stop_spinner()
        name = message.partner_name or "gateway"
        # Markdown is printed as written, so only its escapes need resolving (bot/literal.py)
        self._write(f"{name}: {unescape(message.text)}")
        for choice in message.choices:
            self._write(f"  [{choice.label}] {choice.command}")
        self._replied.set()
        return str(time.time_ns())

    async def send_file(
        self, chat: ChatRef, filename: str, data: bytes, caption: str
    ) -> str | None:
        del chat  # one console, one chat
        path = await asyncio.to_thread(save_without_replacing, self.exports, filename, data)
        self._write(f"gateway: {caption}\n  saved to {path}")
        self._replied.set()
        return str(path)

    def open_stream(self, chat: ChatRef, reply_to: str | None) -> None:
        del chat, reply_to  # the spinner is the console's progress indicator
        return None

    async def typing(self, chat: ChatRef) -> None:
        del chat  # one console, one chat
        if self._show_spinner and (self._spinner is None or self._spinner.done()):
            self._spinner = asyncio.create_task(self._spin())

    async def _spin(self) -> None:
        try:
            for frame in itertools.cycle("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"):
                sys.stderr.write(f"\r{frame} thinking…")
                sys.stderr.flush()
                await asyncio.sleep(SPINNER_SECONDS)
        finally:
            sys.stderr.write("\r" + " " * 14 + "\r")
            sys.stderr.flush()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.cancel()
            self._spinner = None

    def _write(self, text: str, newline: bool = True) -> None:
        self._out.write(text + ("\n" if newline else ""))
        self._out.flush()


def save_without_replacing(directory: Path, filename: str, data: bytes) -> Path:
    """Save ``data`` as ``filename`` in ``directory``; a different file of that name stays as
    it is (it may hold the owner's unsent edits) and ``data`` goes to ``name-2.ext``,
    ``name-3.ext``… instead. A file with the same bytes already there is used as it is."""
    directory.mkdir(parents=True, exist_ok=True)
    name = Path(filename)
    path, number = directory / filename, 1
    while True:
        try:
            with path.open("xb") as handle:  # exclusive: never truncates what is there
                handle.write(data)
            return path
        except FileExistsError:
            if path.read_bytes() == data:
                return path
        number += 1
        path = directory / f"{name.stem}-{number}{name.suffix}"
