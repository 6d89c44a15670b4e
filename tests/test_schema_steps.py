"""The schema steps are append-only (bot/store/migrations/): every step a database may have
applied runs exactly the text it shipped with, on SQLite and on PostgreSQL, as recorded in
tests/data/schema_steps.json; steps are modules numbered 1, 2, 3... in the order they run; a
text both databases run names no column type that differs between them (nothing translates
it any more)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import bot.store.migrations
from bot.store.migrations import MODULES, SCHEMA, Dialects, Migration, for_dialect
from tests import schema_steps
from tests.schema_steps import DIALECTS, current_steps, recorded_steps, step_text

RECORDED = recorded_steps()
SQLITE_ONLY_TYPES = re.compile(r"\b(INTEGER|REAL|BLOB)\b")
"""SQLite's words for what PostgreSQL calls BIGINT, DOUBLE PRECISION and BYTEA (its INTEGER
and REAL are narrower: 32 bits, 6 digits)."""


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda step: f"step {step['number']}")
def test_a_shipped_step_runs_exactly_the_text_it_shipped_with(recorded: dict[str, Any]) -> None:
    number = recorded["number"]
    assert number <= len(SCHEMA), f"step {number} was removed; a shipped step stays"
    for dialect in DIALECTS:
        now = step_text(for_dialect(SCHEMA[number - 1], dialect))
        assert now == recorded[dialect], f"step {number} changed on {dialect}"


def test_the_record_numbers_its_steps_from_one_without_a_gap() -> None:
    assert [step["number"] for step in RECORDED] == list(range(1, len(RECORDED) + 1))


def test_every_step_is_recorded_before_it_ships() -> None:
    new = len(SCHEMA) - len(RECORDED)
    assert new <= 0, f"{new} new step(s): run `python -m tests.schema_steps --append`"


def test_step_modules_are_numbered_in_the_order_they_run() -> None:
    names = [module.__name__.rsplit(".", 1)[1] for module in MODULES]
    for number, name in enumerate(names, start=1):
        assert re.fullmatch(rf"step_{number:02d}_[a-z0-9_]+", name), name
    package = Path(bot.store.migrations.__file__).parent
    on_disk = sorted(path.stem for path in package.glob("step_*.py"))
    assert on_disk == names, "a step module is missing from MODULES or listed out of order"


def test_each_step_module_says_what_it_does() -> None:
    for number, module in enumerate(MODULES, start=1):
        assert (module.__doc__ or "").startswith(f"Step {number}: "), module.__name__


def test_a_text_both_databases_run_names_no_type_that_differs() -> None:
    for number, step in enumerate(SCHEMA, start=1):
        if isinstance(step, Dialects):
            continue
        texts = [step.sql, step.after] if isinstance(step, Migration) else [step]
        for text in texts:
            assert not SQLITE_ONLY_TYPES.search(text), f"step {number}: give each dialect's text"


def test_appending_adds_new_steps_and_never_rewrites_a_recorded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "schema_steps.json"
    older = [dict(step) for step in current_steps()[:-1]]
    older[0]["sqlite"] = "-- as it once shipped"
    record.write_text(json.dumps(older), encoding="utf-8")
    monkeypatch.setattr(schema_steps, "RECORD", record)
    assert schema_steps.append() == 1
    assert schema_steps.append() == 0
    appended = schema_steps.recorded_steps()
    assert appended[0]["sqlite"] == "-- as it once shipped"
    assert appended[1:] == current_steps()[1:]
