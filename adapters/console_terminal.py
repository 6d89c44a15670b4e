"""The console when a person sits at it: a line editor, a spinner, replies as rich text.

* Input is prompt_toolkit's line editor: arrow keys move and recall earlier lines (kept in a
  history file beside the data), Ctrl-C clears the line, and at an empty line a second Ctrl-C
  in a row (or Ctrl-D) ends the session.
* While the partner thinks, rich's spinner runs on the line below the question and erases
  itself before the reply is printed, so a reply never starts with what is left of it.
* Replies are Markdown rendered by rich: bold is bold, lists and code blocks look like them.
  The Markdown is read by the parser every channel shares (``adapters/markdown_parse.py``),
  not rich's own: ``<id>`` or ``<b>`` is text, never HTML that rich would silently drop, and
  each line break is kept (a chat message, ``/help`` included, is written line by line; rich
  would join the lines of a paragraph). Text is never read as rich's ``[style]`` markup.
* Ctrl-C while the partner thinks stops that turn at once (the terminal is not in the line
  editor then, so it arrives as SIGINT; the channel decides what it means).
* Log lines would land in the middle of the conversation: while the terminal is in use they go
  to a file instead (the first line printed says where).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from markdown_it.token import Token
from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from adapters.markdown_inline import escape_text
from adapters.markdown_parse import parse

PROMPT = "you> "
THINKING = "thinking…"
QUIT_HINT = "(Ctrl-C again or Ctrl-D to leave)"


class Terminal:
    """One person at one terminal: reads lines, shows the spinner, prints replies."""

    def __init__(self, out: TextIO, history_file: Path | None) -> None:
        self.console = Console(file=out, highlight=False, soft_wrap=False)
        history: History = InMemoryHistory()
        if history_file is not None:
            history_file.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(history_file))
        self._session: PromptSession[str] = PromptSession(history=history)
        self._status: Status | None = None
        self._prompting = False

    async def read_line(self) -> str | None:
        """The next line typed, or None when the person leaves (Ctrl-D, or Ctrl-C twice at an
        empty line)."""
        interrupted = False
        while True:
            self._prompting = True
            try:
                return await self._session.prompt_async(PROMPT, handle_sigint=False)
            except EOFError:
                return None
            except KeyboardInterrupt:
                if self._session.default_buffer.text:
                    interrupted = False  # Ctrl-C on a line being typed only clears it
                elif interrupted:
                    return None
                else:
                    interrupted = True
                    self.console.print(Text(QUIT_HINT, style="dim"))
            finally:
                self._prompting = False

    def thinking(self) -> None:
        """Show the spinner (until :meth:`show` or :meth:`done_thinking`)."""
        if self._status is None and not self._prompting:
            self._status = self.console.status(THINKING, spinner="dots")
            self._status.start()

    def done_thinking(self) -> None:
        if self._status is not None:
            self._status.stop()  # transient: the line it used is erased
            self._status = None

    def note(self, text: str) -> None:
        """A line from the console itself (dim), printed now."""
        self.done_thinking()
        self.console.print(Text(text, style="dim"))

    async def show(self, name: str, markdown: str, choices: list[tuple[str, str]]) -> None:
        """Print a reply: the speaker's name, then the Markdown as rich text. If the line
        editor is waiting (a message nobody asked for), the reply goes above it."""

        def write() -> None:
            self.done_thinking()
            self.console.print(ChatMarkdown(_with_name(name, markdown)))
            for label, command in choices:
                self.console.print(Text(f"  [{label}] {command}", style="dim"))

        if self._prompting:
            await run_in_terminal(write)
        else:
            write()


class ChatMarkdown(Markdown):
    """rich's Markdown renderer over the shared parser's tokens, every line break kept."""

    def __init__(self, markup: str) -> None:
        super().__init__(markup, hyperlinks=False)
        self.parsed = parse(markup)
        _keep_line_breaks(self.parsed)


def _keep_line_breaks(tokens: list[Token]) -> None:
    """A soft break (one newline inside a paragraph) becomes a hard one: rich shows a soft
    break as a space."""
    for token in tokens:
        if token.children:
            _keep_line_breaks(token.children)
        if token.type == "softbreak":
            token.type = "hardbreak"


def _with_name(name: str, markdown: str) -> str:
    """The name in bold before the reply: on its first line when the reply starts with a
    paragraph, else on a line of its own (before a list, a heading, a code block)."""
    label = f"**{escape_text(name, at_line_start=True)}:**"
    tokens = parse(markdown)
    if tokens and tokens[0].type == "paragraph_open":
        return f"{label} {markdown.lstrip()}"
    return f"{label}\n\n{markdown}"


@contextmanager
def logs_to_file(path: Path) -> Iterator[None]:
    """While in use, log records that would be written to the terminal go to ``path``."""
    root = logging.getLogger()
    terminal = [
        handler
        for handler in root.handlers
        if isinstance(handler, logging.StreamHandler)
        and getattr(handler, "stream", None) in (sys.stderr, sys.stdout)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    to_file = logging.FileHandler(path, encoding="utf-8")
    formatters = [handler.formatter for handler in terminal if handler.formatter is not None]
    to_file.setFormatter(formatters[0] if formatters else logging.Formatter())
    for handler in terminal:
        root.removeHandler(handler)
    root.addHandler(to_file)
    try:
        yield
    finally:
        root.removeHandler(to_file)
        to_file.close()
        for handler in terminal:
            root.addHandler(handler)
