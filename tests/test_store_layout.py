"""The store package's map holds (bot/store/protocol/__init__.py): each concern's interface in
``bot/store/protocol/<concern>.py`` is implemented, method for method, in
``bot/store/<concern>.py`` — written once for both backends, or SQLite's where a concern is
still written twice — beside ``bot/store/postgres/<concern>.py`` where PostgreSQL spells some
of it its own way: a newcomer who reads the interface finds every implementation by the same
name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bot.store.protocol as protocol_package

STORE = Path(protocol_package.__file__).parent.parent
CONCERNS = sorted(
    path.stem for path in (STORE / "protocol").glob("*.py") if path.stem != "__init__"
)


def methods_defined(path: Path) -> set[str]:
    """The public methods of every class in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    }


def test_every_concern_has_its_module() -> None:
    assert len(CONCERNS) > 10
    missing = [
        f"bot/store/{concern}.py" for concern in CONCERNS if not (STORE / f"{concern}.py").exists()
    ]
    assert missing == []


SHARED = STORE / "searchable.py"
"""Written once for both backends and mixed into both."""
BESIDE = {"workers": "shard_leases.py"}
"""A concern whose interface is kept in two modules: the Discord shards' leases are workers'
leases of their own kind, beside the registry and the queue-key leases."""


@pytest.mark.parametrize("concern", CONCERNS)
def test_a_concerns_interface_is_implemented_where_its_name_says(concern: str) -> None:
    wanted = methods_defined(STORE / "protocol" / f"{concern}.py")
    assert wanted, f"protocol/{concern}.py declares no method"
    shared = methods_defined(STORE / f"{concern}.py") | methods_defined(SHARED)
    if concern in BESIDE:
        shared |= methods_defined(STORE / BESIDE[concern])
    assert wanted - shared == set(), f"{concern}.py lacks {sorted(wanted - shared)}"
