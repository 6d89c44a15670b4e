"""Each store query is written once: a method of :class:`bot.store.Store` whose SQLite and
PostgreSQL bodies are near-identical once their parameter marks are made alike is one query
written twice, and a change to one would miss the other. Such a method belongs in the shared
concern (:mod:`bot.store.base`); a backend keeps its own body only where the SQL truly
differs (text search, vectors, locks, fenced writes, arrays)."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable
from typing import Any

from bot.store.postgres.store import PostgresStore
from bot.store.protocol import Store
from bot.store.sqlite import SqliteStore

SIMILAR = 0.8
"""Bodies more alike than this (difflib's ratio) count as one query written twice."""
KNOWN_TWINS = frozenset(
    {
        "close",
        "embedding_watermark",
        "media_for",
        "search_hits",
        "unembedded",
        "vector_log_position",
    }
)
"""Methods of the concerns not yet written once (vectors, search),
and two short ones whose few lines differ where the drivers do
(``close``; ``media_for``: an array parameter and ``seq`` order against one mark per id and
rowid order). The list only shrinks."""


def implementation(store: type, name: str) -> Callable[..., Any]:
    """The function a backend runs for ``name`` (a property's getter, a classmethod's body)."""
    found = next(c.__dict__[name] for c in store.__mro__ if name in c.__dict__)
    if isinstance(found, property):
        found = found.fget
    if isinstance(found, classmethod | staticmethod):
        found = found.__func__
    return found  # type: ignore[no-any-return]


def normalised(function: Callable[..., Any]) -> str:
    """A body with every parameter mark (``?``, ``?2``, ``$2``) alike and the SQLite-only
    helpers' prefix gone, whitespace collapsed."""
    source = re.sub(r"\$\d+|\?\d*", "?", inspect.getsource(function))
    return " ".join(source.replace("_sqlite_", "_").split())


def twins() -> dict[str, float]:
    """Store methods with two near-identical bodies, and how alike they are."""
    found = {}
    for name, _ in inspect.getmembers(Store):
        if name.startswith("_"):
            continue
        sqlite, postgres = implementation(SqliteStore, name), implementation(PostgresStore, name)
        if sqlite is postgres:
            continue
        ratio = difflib.SequenceMatcher(None, normalised(sqlite), normalised(postgres)).ratio()
        if ratio > SIMILAR:
            found[name] = ratio
    return found


def test_no_store_method_is_written_twice() -> None:
    new = {name: ratio for name, ratio in twins().items() if name not in KNOWN_TWINS}
    assert not new, "written twice, write once in the shared concern:\n" + "\n".join(
        f"  {name} ({ratio:.2f} alike)" for name, ratio in sorted(new.items())
    )


def test_the_known_twins_are_still_twins() -> None:
    # a method written once leaves the list, so the list never hides a new twin
    assert KNOWN_TWINS - twins().keys() == set()


def test_a_shared_method_runs_one_body_on_both_backends() -> None:
    assert implementation(SqliteStore, "audit") is implementation(PostgresStore, "audit")
    assert "audit" not in twins()
