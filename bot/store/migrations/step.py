"""What a schema step is: one text both databases run, a :class:`Migration` when stored rows
must be recomputed in Python, or :class:`Dialects` when SQLite and PostgreSQL run different
text. Every text is spelled out as its database runs it; nothing rewrites it on the way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True)
class Migration:
    """A schema step whose data must be recomputed in Python (search terms are made there):
    ``sql`` runs first, then the Store method named ``then``, then ``after`` (SQL that needs
    the recomputed data, such as a new index and its triggers), in one transaction."""

    sql: str
    then: str
    after: str = ""


@dataclass(frozen=True)
class Dialects:
    """A schema step each database spells its own way: the text each one runs."""

    sqlite: str | Migration
    postgres: str | Migration


Step = str | Migration | Dialects
"""One text for both databases (no column types that differ between them: SQLite's INTEGER
and REAL are PostgreSQL's BIGINT and DOUBLE PRECISION), a recompute, or one text each."""


def for_dialect(step: Step, dialect: Dialect) -> str | Migration:
    """What ``dialect`` runs for one step: its own text, or the one both run."""
    if isinstance(step, Dialects):
        return step.sqlite if dialect == "sqlite" else step.postgres
    return step
