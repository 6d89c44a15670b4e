"""Opening the gateway's database: a ``postgresql://`` URL opens the PostgreSQL store, anything
else is the path of a SQLite file. Kept apart from the interface (:mod:`bot.store.protocol`)
so that code written against :class:`Store` loads no database driver; each backend's driver
is loaded here only when a database of its kind is opened."""

from __future__ import annotations

from pathlib import Path

from bot.store.protocol import Store

URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database (else it is a SQLite file)."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


async def open_store(location: Path | str) -> Store:
    """The store in the database at ``location``, created or migrated to the current schema
    as needed (``Config.database`` says which the config asks for)."""
    # imported here, not above: a SQLite gateway never loads asyncpg, nor a PostgreSQL one
    # aiosqlite
    if is_database_url(location):
        from bot.store.postgres.store import PostgresStore

        return await PostgresStore.open(str(location))
    from bot.store.sqlite import SqliteStore

    return await SqliteStore.open(Path(location))
