"""The PostgreSQL store: one database that several gateway workers can share, composed from
one class per concern like :class:`bot.store.sqlite.SqliteStore`. This module opens the pool,
applies the schema (one worker at a time) and answers what has no PostgreSQL equivalent
here, such as a backup file."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from bot.store.audit import Audit
from bot.store.checkins import Checkins
from bot.store.confirmations import PendingConfirmations
from bot.store.errors import BACKUP_ADVICE, StoreError
from bot.store.postgres.base import PostgresBase
from bot.store.postgres.chats import PostgresChats
from bot.store.postgres.connection import connect, create_pool, redacted
from bot.store.postgres.documents import PostgresDocuments
from bot.store.postgres.forgetting import PostgresForgetting
from bot.store.postgres.media import PostgresMedia
from bot.store.postgres.migrations import migrate, schema_version
from bot.store.postgres.queue import PostgresQueue
from bot.store.postgres.review import PostgresReviewState
from bot.store.postgres.shard_leases import PostgresShardLeases
from bot.store.postgres.turn_context import TurnContexts
from bot.store.postgres.vectors import Vectors
from bot.store.postgres.workers import PostgresWorkers
from bot.store.tool_calls import ToolCalls
from bot.store.usage import Usage
from bot.store.users import Users
from bot.store.web import WebLogins


class PostgresStore(
    Users,
    PostgresChats,
    PostgresQueue,
    TurnContexts,
    PostgresMedia,
    PostgresReviewState,
    PostgresForgetting,
    Checkins,
    Usage,
    Audit,
    Vectors,
    WebLogins,
    PostgresWorkers,
    PostgresShardLeases,
    PostgresDocuments,
    ToolCalls,
    PendingConfirmations,
    PostgresBase,
):
    """The :class:`bot.store.Store` interface on PostgreSQL (asyncpg, a pool per process)."""

    def __init__(self, pool: asyncpg.Pool, url: str) -> None:
        super().__init__(pool)
        self.url = redacted(url)
        """Where the database is, as it may be shown (no password)."""

    @classmethod
    async def open(cls, location: Path | str) -> PostgresStore:
        """The store in the database at the URL ``location``, migrated as needed."""
        url = str(location)
        pool = await create_pool(url)
        store = cls(pool, url)
        try:
            await _migrate(url, store)
            await store._load_search_languages()
        except asyncpg.InsufficientPrivilegeError as exc:
            await pool.close()
            raise StoreError(
                f"cannot create the gateway's tables in {redacted(url)}: {exc} (connect as a"
                " user who may create tables in the database, such as its owner)"
            ) from exc
        except BaseException:
            await pool.close()
            raise
        return store

    async def _recompute(self, method: str) -> None:
        # every PostgreSQL database starts at the current search terms (schema step 8)
        raise StoreError(f"schema step asks for {method}, which PostgreSQL has no need of")

    async def close(self) -> None:
        await self._pool.close()

    async def schema_version(self) -> int:
        self._round_trips += 1
        async with self._pool.acquire() as db:
            return await schema_version(db)

    async def backup_to(self, target: Path) -> None:
        """A backup file is SQLite's; PostgreSQL has pg_dump (see :data:`BACKUP_ADVICE`)."""
        del target
        raise StoreError(BACKUP_ADVICE)


async def _migrate(url: str, store: PostgresStore) -> None:
    """Apply the schema on a connection of its own, without the pool's statement timeout: a
    step on a large database, or the wait for another worker's step, may take minutes."""
    db = await connect(url)
    try:
        await migrate(db, store._recompute)
    finally:
        await db.close()
