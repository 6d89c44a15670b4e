"""How the person at this shell types one of our commands, so a "Next:" line works as printed.

A fresh clone installs ``companion`` into ``.venv/bin``, which no shell has on its PATH: a hint
that says ``companion doctor`` answers "command not found". So a hint names the program as it
can be typed here: ``make run`` while make runs us (``make setup`` → ``make run``), plain
``companion`` when that name on PATH is this very program, else this program's path
(``.venv/bin/companion`` from the checkout, the full path elsewhere). A config file named with
``--config`` is named again, so the command reads the same file.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

PROGRAM = "companion"
MAKE_TARGETS = frozenset({"setup", "run"})
"""The subcommands the Makefile runs, without arguments, on the default config file."""


def command(line: str, config: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """``line`` (``"doctor"``, ``"run"``) as a command that works typed in this shell."""
    env = os.environ if environ is None else environ
    if line in MAKE_TARGETS and config is None and "MAKELEVEL" in env:
        return f"make {line}"
    named = f" --config {config}" if config is not None else ""
    return f"{program(env)}{named} {line}"


def program(environ: Mapping[str, str] | None = None) -> str:
    """``companion``, or this program's path when that name would not find it."""
    env = os.environ if environ is None else environ
    ours = this_program()
    if ours is None:
        return PROGRAM
    on_path = shutil.which(PROGRAM, path=env.get("PATH", os.defpath))
    if on_path is not None and _same_file(Path(on_path), ours):
        return PROGRAM
    return _typed(ours)


def this_program() -> Path | None:
    """The ``companion`` script running now, or the one installed beside this Python (when
    run as ``python -m bot.cli.main``)."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name == PROGRAM and started.is_file():
        return started
    beside = Path(sys.executable).parent / PROGRAM
    return beside if beside.is_file() else None


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.samefile(other)
    except OSError:
        return False


def _typed(path: Path) -> str:
    """The path relative to here when it lies below (``.venv/bin/companion``), else whole;
    never resolved through a symlink, which would leave the virtual environment."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
    return relative if os.sep in relative else f".{os.sep}{relative}"
