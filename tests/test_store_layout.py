"""The store package's map holds (bot/store/protocol/__init__.py): each concern's interface in
``bot/store/protocol/<concern>.py`` is implemented, method for method, in
``bot/store/<concern>.py`` (SQLite) and ``bot/store/postgres/<concern>.py`` (PostgreSQL), so a
newcomer who reads one finds the other two by the same name."""

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


def test_every_concern_has_both_implementations() -> None:
    assert len(CONCERNS) > 10
    missing = [
        str(path.relative_to(STORE.parent.parent))
        for concern in CONCERNS
        for path in (STORE / f"{concern}.py", STORE / "postgres" / f"{concern}.py")
        if not path.exists()
    ]
    assert missing == []


SHARED = STORE / "searchable.py"
"""Written once for both backends and mixed into both."""


@pytest.mark.parametrize("concern", CONCERNS)
def test_a_concerns_interface_is_implemented_where_its_name_says(concern: str) -> None:
    wanted = methods_defined(STORE / "protocol" / f"{concern}.py")
    assert wanted, f"protocol/{concern}.py declares no method"
    for path in (STORE / f"{concern}.py", STORE / "postgres" / f"{concern}.py"):
        elsewhere = wanted - methods_defined(path) - methods_defined(SHARED)
        assert elsewhere == set(), f"{path.name} lacks {sorted(elsewhere)}"
