"""The record of every shipped schema step: the exact text each database runs for it, kept in
``tests/data/schema_steps.json`` so a test can tell when a step that databases have already
applied changes (tests/test_schema_steps.py).

The record only grows. After appending a step module to :mod:`bot.store.migrations`, run
``python -m tests.schema_steps --append``: it adds the steps the record lacks and never
rewrites one it has."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bot.store import SCHEMA, Migration, for_dialect

RECORD = Path(__file__).parent / "data" / "schema_steps.json"
DIALECTS = ("sqlite", "postgres")


def step_text(step: str | Migration) -> str | dict[str, str]:
    """One database's text of one step as the record spells it."""
    if isinstance(step, Migration):
        return {"sql": step.sql, "then": step.then, "after": step.after}
    return step


def current_steps() -> list[dict[str, Any]]:
    """Every step of the current schema, numbered from 1, with each database's text."""
    return [
        {"number": number, **{d: step_text(for_dialect(step, d)) for d in DIALECTS}}
        for number, step in enumerate(SCHEMA, start=1)
    ]


def recorded_steps() -> list[dict[str, Any]]:
    """The steps the record holds."""
    steps: list[dict[str, Any]] = json.loads(RECORD.read_text(encoding="utf-8"))
    return steps


def append() -> int:
    """Add the current steps the record lacks; the ones it has stay as they are. Returns how
    many were added."""
    recorded = recorded_steps() if RECORD.exists() else []
    added = current_steps()[len(recorded) :]
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(recorded + added, indent=1) + "\n", encoding="utf-8")
    return len(added)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--append", action="store_true", help="add the new steps to the record (never rewrites)"
    )
    if not parser.parse_args().append:
        parser.error("say --append to add the steps the record lacks")
    print(f"{append()} step(s) added to {RECORD}")


if __name__ == "__main__":
    main()
