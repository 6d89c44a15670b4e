"""SQLite's recording of a batch of messages (an imported history stores thousands at once):
every statement in one hand-off to the database thread, and each message indexed once.

A message stored alone is indexed by the schema's ``messages_indexed`` trigger, which also
makes it the "after" context of the message before it in its thread, rewriting that one's
index entry (a delete and an insert in the full-text index): three index writes a message. A
batch is stored as the same rows in two steps instead: each row inserted unindexed (``terms``
NULL, so that trigger does not fire), then given its terms and both its neighbours' at once
(``messages_reindexed`` indexes it once), the thread's last row before the batch given its new
"after", and the batch's search scopes listed. The rows and the index end as storing the
messages one by one leaves them (tests/test_store_bulk_messages.py stores both ways)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from bot.store.connection import SqliteBase
from bot.store.messages import INSERT_MEDIA, INSERT_MESSAGE, Messages, media_values
from bot.store.rows import NewMedia, NewMessage
from bot.store.searchable import THREAD_ROLES

TERMS, SCOPE, THREADED = 14, 15, 16
"""Where :meth:`Messages._message_values` puts a message's index terms, its scope and whether
it belongs to a thread; the thread is (chat_key, partner_id, audience), at 4, 3 and 10."""
LAST_IN_THREAD = (
    "SELECT id, terms FROM messages WHERE chat_key = ? AND partner_id = ? AND audience = ?"
    " AND terms IS NOT NULL AND role IN (" + ", ".join(f"'{r}'" for r in THREAD_ROLES) + ")"
    " ORDER BY id DESC LIMIT 1"
)
SET_TERMS = "UPDATE messages SET terms = ?, before_terms = ?, after_terms = ? WHERE id = ?"
SET_AFTER = "UPDATE messages SET after_terms = ? WHERE id = ?"
ADD_SCOPE = "INSERT OR IGNORE INTO search_scopes (partner_id, scope) VALUES (?, ?)"
Values = tuple[Any, ...]
Row = tuple[Values, tuple[NewMedia, ...]]
"""A message's INSERT_MESSAGE parameters and its media."""


class SqliteMessages(Messages, SqliteBase):
    """:meth:`add_messages` in one trip, each message indexed once."""

    async def _insert_messages(self, messages: Sequence[NewMessage]) -> list[int | None]:
        rows = [(self._message_values(m), m.media) for m in messages]
        return await self._in_one_trip(lambda db: _store(db, rows))


def _store(db: sqlite3.Connection, rows: list[Row]) -> list[int | None]:
    """Insert the rows unindexed (those already stored are skipped), then index them."""
    ids: list[int | None] = []
    stored: list[tuple[int, Values]] = []
    for values, media in rows:
        unindexed = (*values[:TERMS], None, values[SCOPE], False)
        row = db.execute(INSERT_MESSAGE, unindexed).fetchone()
        ids.append(None if row is None else int(row[0]))
        if row is None:
            continue
        if media:
            db.executemany(INSERT_MEDIA, [(row[0], *media_values(x)) for x in media])
        if values[TERMS] is not None:
            stored.append((int(row[0]), values))
    _index(db, stored)
    return ids


def _index(db: sqlite3.Connection, stored: list[tuple[int, Values]]) -> None:
    """Give the stored rows their terms and their neighbours' in their threads, as the
    trigger would have one row at a time."""
    threads: dict[tuple[Any, Any, Any], list[int]] = {}
    for position, (_, values) in enumerate(stored):
        if values[THREADED]:
            threads.setdefault((values[4], values[3], values[10]), []).append(position)
    before: list[str | None] = [None] * len(stored)
    after: list[str | None] = [None] * len(stored)
    for thread, positions in threads.items():
        last = db.execute(LAST_IN_THREAD, thread).fetchone()  # the batch's rows: no terms yet
        previous = None if last is None else last[1]
        for position, following in zip(positions, [*positions[1:], None], strict=True):
            before[position] = previous
            previous = stored[position][1][TERMS]
            if following is not None:
                after[position] = stored[following][1][TERMS]
        if last is not None:
            db.execute(SET_AFTER, (stored[positions[0]][1][TERMS], last[0]))
    db.executemany(
        SET_TERMS,
        [(values[TERMS], before[p], after[p], id_) for p, (id_, values) in enumerate(stored)],
    )
    db.executemany(ADD_SCOPE, sorted({(values[3], values[SCOPE]) for _, values in stored}))
