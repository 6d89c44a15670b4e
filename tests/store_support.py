"""Reading a store's search index from outside the store, on either backend: what the
contract tests use to show that a word is (or is no longer) anywhere in the index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg

from tests.conftest import StoreBackend

POSTGRES_TERM_COLUMNS = ("terms", "before_terms", "after_terms")


async def index_vocabulary(backend: StoreBackend) -> set[str]:
    """Every term the search index holds."""
    if backend.name == "sqlite":
        return _sqlite_vocabulary(Path(backend.location))
    db = await asyncpg.connect(str(backend.location))
    try:
        rows = await db.fetch(
            "SELECT DISTINCT unnest(string_to_array(terms, ' ') || string_to_array(before_terms,"
            " ' ') || string_to_array(after_terms, ' ')) FROM messages WHERE terms IS NOT NULL"
        )
    finally:
        await db.close()
    return {row[0] for row in rows}


async def indexed_rows(backend: StoreBackend, word: str) -> list[tuple]:
    """Every index row and index term that still holds ``word``, read from the database."""
    if backend.name == "sqlite":
        return _sqlite_rows(Path(backend.location), word)
    db = await asyncpg.connect(str(backend.location))
    try:
        rows = await db.fetch(
            "SELECT id, terms, before_terms, after_terms FROM messages"
            " WHERE concat_ws(' ', terms, before_terms, after_terms) LIKE '%' || $1 || '%'",
            word,
        )
    finally:
        await db.close()
    return [tuple(row) for row in rows]


def _sqlite_vocabulary(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, message_index, row)")
        return {row[0] for row in db.execute("SELECT term FROM temp.vocab")}
    finally:
        db.close()


def _sqlite_rows(path: Path, word: str) -> list[tuple]:
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT rowid, terms, before_terms, after_terms FROM message_index"
        ).fetchall()
        db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, message_index, row)")
        terms = db.execute("SELECT term FROM temp.vocab WHERE term = ?", (word,)).fetchall()
    finally:
        db.close()
    return [row for row in rows if word in " ".join(filter(None, row[1:]))] + terms
