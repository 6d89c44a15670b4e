"""The SQLite store: the embedded default (one file, WAL, versioned migrations applied at open),
composed from one class per concern. Each concern's SQL lives in its own module; this one
opens the file, applies the schema and copies the database for a backup."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bot.store.audit import Audit
from bot.store.chats import Chats
from bot.store.checkins import Checkins
from bot.store.confirmations import PendingConfirmations
from bot.store.connection import Connection, SqliteBase, statements
from bot.store.documents import SqliteDocuments
from bot.store.errors import StoreError, StoreUnavailable
from bot.store.forgetting import SqliteForgetting
from bot.store.media import SqliteMedia
from bot.store.migrations import SCHEMA, Migration, for_dialect
from bot.store.queue import SqliteQueue
from bot.store.review import SqliteReviewState
from bot.store.shard_leases import SqliteShardLeases
from bot.store.sqlite_messages import SqliteMessages
from bot.store.tool_calls import ToolCalls
from bot.store.turn_context import TurnContexts
from bot.store.usage import Usage
from bot.store.users import Users
from bot.store.vectors import Vectors
from bot.store.web import WebLogins
from bot.store.workers import SqliteWorkers


class SqliteStore(
    Users,
    Chats,
    SqliteQueue,
    TurnContexts,
    SqliteMedia,
    SqliteReviewState,
    SqliteForgetting,
    SqliteMessages,
    Checkins,
    Usage,
    Audit,
    Vectors,
    WebLogins,
    SqliteWorkers,
    SqliteShardLeases,
    SqliteDocuments,
    ToolCalls,
    PendingConfirmations,
    SqliteBase,
):
    """The :class:`bot.store.Store` interface on SQLite (the standard library's sqlite3 on a
    thread of its own, see :mod:`bot.store.connection`)."""

    @classmethod
    async def open(cls, location: Path | str) -> SqliteStore:
        """The store in the SQLite file at ``location``, created or migrated as needed."""
        path = Path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = await Connection.open(path)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database {path}: {exc}") from exc
        store = cls(db, path)
        try:
            await store._prepare()
        except BaseException as exc:
            # closed on every failure: an open connection's thread would keep the process
            # from exiting
            await db.close()
            if isinstance(exc, StoreError) or not isinstance(
                exc, (sqlite3.DatabaseError, StoreUnavailable)
            ):
                raise
            raise StoreError(f"cannot use the database {path}: {exc}") from exc
        return store

    async def close(self) -> None:
        await self._db.close()

    async def _prepare(self) -> None:
        await self._db.execute("PRAGMA journal_mode = WAL")
        await self._db.execute("PRAGMA synchronous = NORMAL")
        await self._db.execute("PRAGMA busy_timeout = 5000")
        await self._db.execute("PRAGMA foreign_keys = ON")
        # deleted rows are overwritten, not left in free space: forgotten text must not stay
        # readable in the file (some builds have this on by default, not all)
        await self._db.execute("PRAGMA secure_delete = ON")
        version = await self.schema_version()
        if version > len(SCHEMA):
            raise StoreError(
                f"{self.path} was written by a newer version (schema {version}); upgrade first"
            )
        for number, step in enumerate(SCHEMA[version:], start=version + 1):
            await self._migrate(number, for_dialect(step, "sqlite"))
        await self._load_search_languages()

    async def _migrate(self, number: int, step: str | Migration) -> None:
        """One schema version, its Python part included, in one transaction."""
        sql = step if isinstance(step, str) else step.sql
        # executescript commits an open transaction first, so BEGIN goes inside the script
        await self._db.executescript(f"BEGIN; {sql};")
        try:
            if isinstance(step, Migration):
                await getattr(self, step.then)()
                if step.after:
                    await self._execute_script(step.after)
            await self._db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            await self._db.execute("ROLLBACK")
            raise
        await self._db.execute("COMMIT")

    async def _execute_script(self, script: str) -> None:
        """Run several statements inside the open transaction (executescript would commit)."""
        for statement in statements(script):
            await self._db.execute(statement)

    async def schema_version(self) -> int:
        row = await self._sqlite_one("PRAGMA user_version")
        return int(row[0]) if row else 0

    async def backup_to(self, target: Path) -> None:
        """A consistent copy of the live database (SQLite online backup)."""
        await self._db.backup(target)
