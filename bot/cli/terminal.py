"""The person at the terminal: questions, confirmations and notices that must not be missed.

Commands like ``companion setup`` and ``companion partners delete`` ask before they act. They
read answers from stdin line by line, so a script can pipe them in; at the end of input a
question has no answer (None) and the command says which option to pass instead. Everything
is written to stderr, so a command's stdout stays its result. Text a stranger chose (a display
name in a pairing notice) passes :func:`printable` first: a terminal would obey the escape
sequences in it.
"""

from __future__ import annotations

import getpass
import sys
import unicodedata

YES = frozenset({"y", "yes"})
RULE = "=" * 72


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def ask(question: str, default: str | None = None) -> str | None:
    """One line typed in answer: ``default`` (or "") for an empty line, None at the end of
    input."""
    shown = f"{question} [{default}]: " if default else f"{question}: "
    print(shown, end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    if not line:
        print(file=sys.stderr)
        return None
    return line.strip() or default or ""


def ask_secret(question: str) -> str | None:
    """Like :func:`ask`, without echoing what is typed at a terminal (tokens, keys)."""
    if not sys.stdin.isatty():
        return ask(question)
    try:
        return getpass.getpass(f"{question}: ", stream=sys.stderr).strip()
    except EOFError:
        return None


def confirm(question: str) -> bool | None:
    """Yes or no (anything but y/yes is no); None at the end of input."""
    answer = ask(f"{question} (y/N)")
    return None if answer is None else answer.lower() in YES


def announce(*lines: str) -> None:
    """A notice framed by rules, so it stands out between log lines."""
    print("\n".join(("", RULE, *lines, RULE, "")), file=sys.stderr, flush=True)


def printable(text: str) -> str:
    """``text`` without control and format characters (escape sequences, bidi overrides)."""
    return "".join(
        "?" if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in text.replace("\n", " ")
    )
