"""The store's errors: one family, so the layers above handle a database that cannot work
without knowing which database it is (no caller outside the store imports ``sqlite3``)."""

from __future__ import annotations


class StoreUnavailable(Exception):
    """The database refused a read or write for now (an I/O error, a lock held too long): the
    caller keeps what it has and tries again later; nothing stored is lost."""


class StoreFull(StoreUnavailable):
    """The disk (or quota) under the database is full: nothing more can be written until
    space is freed."""


class StoreError(StoreUnavailable):
    """The database cannot be opened or used at all: a path that is not a database, a file
    written by a newer version. Starting again does not help; the message says what to do."""


class LeaseLost(Exception):
    """The caller no longer holds the lease (or the leadership) its write was fenced by:
    another worker took it over, so the write was refused and nothing was written. Not an
    outage: the caller stops working on that queue key (or stops its leader-only services)
    and leaves the rest to the new holder."""


BACKUP_ADVICE = (
    "the database is on PostgreSQL: back it up with pg_dump (for example"
    ' `pg_dump --format=custom --file=companion.dump "$DATABASE_URL"`) or the server\'s own'
    " backups; `companion backup` copies only a SQLite database"
)
"""Why a PostgreSQL database gets no backup file, and what backs it up instead (here, away
from the driver, so that a module that only names it loads no PostgreSQL code)."""
