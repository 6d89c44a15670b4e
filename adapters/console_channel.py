"""The console channel: talk to a partner in the terminal, as the owner.

Each line typed is one message through the same gateway, dispatcher and chat loop as Telegram
or Discord; the channel waits for its reply before reading the next line, and reports the end
of the conversation through :attr:`finished`.

At a terminal (stdin and stdout both one) the conversation is the terminal's
(``adapters/console_terminal.py``): line editing and history, a spinner while the partner
thinks, replies as rich text, Ctrl-C to stop a turn, log lines kept in a file. Otherwise
(pipes, tests) lines are read as they come and replies printed as ``Name: text``, Markdown as
written (only its escapes resolved), with no escape codes. Files a reply carries are saved in
the exports directory, never over a different file already there: the owner may be editing
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from adapters.base import Receiver
from adapters.console_terminal import Terminal, logs_to_file
from bot.events import ChatRef, Inbound, Outbound, Sender
from bot.text.literal import unescape

CONSOLE_CHAT = ChatRef("console", "console", "dm", title="console")
REPLY_TIMEOUT_SECONDS = 900.0
LOG_FILE = "logs/console.log"
HISTORY_FILE = "console_history"


class ConsoleChannel:
    platform = "console"

    def __init__(
        self,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        exports: Path = Path("data/exports"),
        user_name: str = "you",
    ) -> None:
        self.exports = exports
        self.user = Sender("console", "console", user_name)
        """The person at the console (the owner), by the name partners call them."""
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self.interactive = self._in.isatty() and self._out.isatty()
        """A person at a terminal (not a pipe): the terminal mode, and Ctrl-C is ours."""
        data_dir = exports.parent
        self.log_file = data_dir / LOG_FILE
        self._terminal = Terminal(self._out, data_dir / HISTORY_FILE) if self.interactive else None
        self._replied = asyncio.Event()
        self._waiting = False
        self._receiver: Receiver | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stopping: asyncio.Task[bool] | None = None
        self._logs = contextlib.ExitStack()
        self._logs_redirected = False
        self.finished = asyncio.Event()

    @property
    def connected(self) -> bool:
        """The terminal is "connected" while input is being read."""
        return self._reader is not None and not self._reader.done()

    def keep_logs_off_the_terminal(self) -> None:
        """At a terminal, log lines go to :attr:`log_file` from now until :meth:`stop` (call
        it before the gateway is built: building logs too)."""
        if self._terminal is not None and not self._logs_redirected:
            self._logs.enter_context(logs_to_file(self.log_file))
            self._logs_redirected = True

    async def start(self, receiver: Receiver) -> None:
        self._receiver = receiver
        if self._terminal is not None:
            self.keep_logs_off_the_terminal()
            self._terminal.note(f"(log lines go to {self.log_file})")
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._interrupted)
        read = self._terminal_loop() if self._terminal is not None else self._plain_loop()
        self._reader = asyncio.create_task(read, name="console input")

    async def stop(self) -> None:
        if self._terminal is not None:
            self._terminal.done_thinking()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self._logs.close()
        self._logs_redirected = False

    # ---- reading ---------------------------------------------------------------------

    async def _terminal_loop(self) -> None:
        assert self._terminal is not None
        try:
            while (line := await self._terminal.read_line()) is not None:
                if line.strip():
                    await self._ask(line.strip())
        finally:
            self.finished.set()

    async def _plain_loop(self) -> None:
        lines = self._start_reader_thread()
        try:
            while line := await lines.get():
                if line.strip():
                    await self._ask(line.strip())
        finally:
            self.finished.set()

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

    async def _ask(self, text: str) -> None:
        """Send one line as a message and wait for its reply."""
        assert self._receiver is not None
        self._replied.clear()
        inbound = Inbound(CONSOLE_CHAT, self.user, str(time.time_ns()), text, datetime.now(UTC))
        self._waiting = True
        try:
            await self._receiver.receive(inbound)
            await asyncio.wait_for(self._replied.wait(), REPLY_TIMEOUT_SECONDS)
        finally:
            self._waiting = False

    def _interrupted(self) -> None:
        """Ctrl-C while the partner thinks: stop that turn (its reply is a short note)."""
        if self._waiting and self._receiver is not None and self._terminal is not None:
            self._terminal.done_thinking()
            self._stopping = asyncio.create_task(self._receiver.stop_turn(CONSOLE_CHAT))

    # ---- writing ---------------------------------------------------------------------

    def split(self, text: str) -> list[str]:
        return [text]

    async def send(self, message: Outbound) -> str | None:
        name = message.partner_name or "gateway"
        choices = [(choice.label, choice.command) for choice in message.choices]
        if self._terminal is not None:
            await self._terminal.show(name, message.text, choices)
        else:
            # Markdown is printed as written, so only its escapes need resolving
            # (bot/text/literal.py)
            self._write(f"{name}: {unescape(message.text)}")
            for label, command in choices:
                self._write(f"  [{label}] {command}")
        self._replied.set()
        return str(time.time_ns())

    async def send_file(
        self, chat: ChatRef, filename: str, data: bytes, caption: str
    ) -> str | None:
        del chat  # one console, one chat
        path = await asyncio.to_thread(save_without_replacing, self.exports, filename, data)
        if self._terminal is not None:
            await self._terminal.show("gateway", f"{caption}\n\nsaved to `{path}`", [])
        else:
            self._write(f"gateway: {caption}\n  saved to {path}")
        self._replied.set()
        return str(path)

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> None:
        del chat, reply_to, partner_id  # the spinner is the console's progress indicator
        return None

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        del chat, partner_id  # one console, one chat, one voice
        if self._terminal is not None and self._waiting:
            self._terminal.thinking()

    def _write(self, text: str) -> None:
        self._out.write(text + "\n")
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
