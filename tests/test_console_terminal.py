"""The console as a person at a terminal uses it: ``companion chat`` in a pseudo-terminal
(pexpect), against the fake LLM.

A reply is printed as rich text, never starting with what the spinner left and never with a
log line in it (those go to a file); arrow keys edit the line; Ctrl-C stops a turn at once and
the conversation goes on; Ctrl-C twice at an empty line ends the session.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.fakes.fake_llm import FakeLLM, Reply
from tests.test_cli import ROOT, write_config

PROMPT = "you>"  # the space after it is drawn as a cursor move
WAIT_SECONDS = 30
SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
BOLD = "\x1b[1m"


def visible(raw: str) -> str:
    """What a terminal shows of a stretch of output, escape codes aside."""
    return ANSI.sub("", raw)


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


async def start_chat(config: Path, *args: str) -> pexpect.spawn:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    # a pseudo-terminal does not answer prompt_toolkit's cursor position requests
    env.update(TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "bot.cli.main", "--config", str(config), *args, "chat"],
        cwd=str(ROOT),
        env=env,
        encoding="utf-8",
        dimensions=(40, 100),
        timeout=WAIT_SECONDS,
    )
    await child.expect_exact(PROMPT, async_=True)
    return child


async def reply_after(child: pexpect.spawn, line: str | None) -> tuple[str, str]:
    """Type a line (None: wait for the reply to one typed already); return the raw output
    before the reply (the spinner's time) and the reply itself, up to the next prompt."""
    if line is not None:
        child.send(line + "\r")
    await child.expect_exact("Mira", async_=True)
    waiting = str(child.before)
    await child.expect_exact(PROMPT, async_=True)
    return waiting, "Mira" + str(child.before)


def line_left_before(raw: str) -> str:
    """What remains visible on the line where the next output starts: the text after the
    last line break, carriage return or erase-line code."""
    last = max(raw.rfind("\n"), raw.rfind("\r"), raw.rfind("\x1b[2K") + 3)
    return visible(raw[last + 1 :])


async def test_a_reply_is_rich_text_with_no_spinner_or_log_line_in_it(
    llm: FakeLLM, tmp_path: Path
) -> None:
    spinning = asyncio.Event()

    async def answer_once_the_spinner_shows(request: dict[str, Any]) -> Reply:
        del request
        await spinning.wait()
        return Reply(text="**Hi** there, I'm *Mira*.")

    llm.responder = answer_once_the_spinner_shows
    child = await start_chat(write_config(tmp_path, llm.base_url), "-v")  # -v: INFO logs
    try:
        assert "INFO" not in visible(str(child.before))  # not even while starting
        child.send("hello\r")
        await child.expect_exact("thinking", async_=True)
        spinning.set()
        waiting, reply = await reply_after(child, None)
        assert line_left_before(waiting).strip() == ""  # the spinner's line is erased
        assert not any(frame in reply for frame in SPINNER_FRAMES) and "thinking" not in reply
        assert "INFO" not in visible(waiting + reply) and "WARNING" not in visible(reply)
        assert "Mira: Hi there, I'm Mira." in visible(reply)
        assert "**" not in reply and BOLD in reply  # Markdown shown as rich text
    finally:
        child.close(force=True)
    assert " INFO " in (tmp_path / "data" / "logs" / "console.log").read_text(encoding="utf-8")


async def test_arrow_keys_edit_the_line_and_recall_the_last_one(
    llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(Reply(text="One."), Reply(text="Two."))
    child = await start_chat(write_config(tmp_path, llm.base_url))
    try:
        await reply_after(child, "helo\x1b[Dl")  # left arrow, then the missing letter
        await reply_after(child, "\x1b[A")  # up arrow: the line before, sent again
    finally:
        child.close(force=True)
    asked = [r["messages"][-1]["content"] for r in llm.requests]
    assert len(asked) == 2 and all("hello" in text and "^[" not in text for text in asked)


async def test_ctrl_c_stops_the_turn_at_once_and_the_conversation_goes_on(
    llm: FakeLLM, tmp_path: Path
) -> None:
    llm.script(Reply(text="A story that never comes.", delay_seconds=600), Reply(text="Hello!"))
    child = await start_chat(write_config(tmp_path, llm.base_url))
    try:
        child.send("tell me a very long story\r")
        await llm.wait_for_requests(1)
        await child.expect_exact("thinking", async_=True)
        child.sendintr()
        await child.expect_exact("(stopped)", async_=True)
        await child.expect_exact(PROMPT, async_=True)
        _, reply = await reply_after(child, "never mind")
        assert "Mira: Hello!" in visible(reply)
        child.sendintr()  # at an empty line: a hint, then a second Ctrl-C leaves
        await child.expect_exact("Ctrl-C again", async_=True)
        await child.expect_exact(PROMPT, async_=True)
        child.sendintr()
        await child.expect(pexpect.EOF, async_=True)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert len(llm.requests) == 2


async def test_a_reply_keeps_every_character_its_line_breaks_and_no_markup(
    llm: FakeLLM, tmp_path: Path
) -> None:
    lines = [
        "First line with <id> and <name>,",
        "second line with [bold]not bold[/bold] and [red]x[/red],",
        "third line with <b>tags</b> and `<code>` in code.",
    ]
    llm.script(Reply(text="\n".join(lines)))
    child = await start_chat(write_config(tmp_path, llm.base_url))
    try:
        _, reply = await reply_after(child, "show me")
    finally:
        child.close(force=True)
    shown = [line.rstrip() for line in visible(reply).splitlines()]
    # the code span is rendered as code: its backticks go, its text stays
    assert shown[:3] == [f"Mira: {lines[0]}", lines[1], lines[2].replace("`", "")]


async def test_help_and_admin_at_a_terminal_keep_their_lines_and_placeholders(
    llm: FakeLLM, tmp_path: Path
) -> None:
    child = await start_chat(write_config(tmp_path, llm.base_url))
    shown: dict[str, list[str]] = {}
    try:
        for command in ("/help", "/admin"):
            child.send(command + "\r")
            await child.expect_exact("gateway", async_=True)
            await child.expect_exact(PROMPT, async_=True)
            shown[command] = [line.strip() for line in visible(str(child.before)).splitlines()]
    finally:
        child.close(force=True)
    assert "/help — this list" in shown["/help"]
    assert "/forget <id>|all|history — make it forget" in shown["/help"]
    assert "/admin approve <code> — let a pairing user in" in shown["/admin"]
    assert "/admin partner show <id> — a partner's settings and files" in shown["/admin"]
