"""Deleting a user's messages and erasing what forgetting left, on PostgreSQL (the rest of
forgetting is :mod:`bot.store.forgetting`, written once for both backends). Every deletion of
messages also rewrites the neighbours' context columns, so no copy of forgotten words stays in
the index.

What "no copy left" means on PostgreSQL, which has no ``secure_delete``: a DELETE or UPDATE
leaves the old row version in its page until VACUUM removes it, so :meth:`erase_deleted_text`
vacuums every table forgetting touches, then rebuilds the search index (a GIN index keeps a
term as a key after VACUUM emptied its postings; the new index is built beside the old one,
so writes go on meanwhile, at the cost of reading every indexed message once per forget).
After that no query, dump or copy of the database made afterwards holds the words, nor do the
search index's files. It does not reach: bytes of a removed row version inside a table page
that has not been written again (VACUUM compacts a page but does not zero its free space;
``VACUUM FULL`` rewrites the table, under a lock that stops every worker meanwhile, so it is
the owner's to run), the write-ahead log until the server recycles those segments (after the
next checkpoints), a row version an older transaction of another worker still sees (the next
VACUUM takes it), and copies outside this server — replicas, WAL archives, pg_dump files
(docs/forgetting.md)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.forgetting import Forgetting
from bot.store.postgres.base import PostgresBase
from bot.store.postgres.messages import PostgresMessages

MAINTENANCE_TIMEOUT_SECONDS = 3600.0
"""VACUUM and the rebuilt search index after forgetting take as long as the tables are big:
they are not held to the pool's statement timeout (they block no turn)."""
FORGETTING_TABLES = (
    "messages", "media", "message_vectors", "sessions", "reminders", "forget_operations",
    "deliveries",
)  # fmt: skip
"""The tables whose rows forgetting deletes or rewrites: what erase_deleted_text vacuums."""


class PostgresForgetting(PostgresMessages, Forgetting, PostgresBase):
    """Deleting messages and erasing what they left, on PostgreSQL."""

    async def delete_messages(self, message_ids: Sequence[int]) -> int:
        """The one way a message leaves the store: the row, (by triggers) its media and
        vector, and the copies of its words in its neighbours' context columns. Returns how
        many were still there."""
        ids = list(message_ids)
        async with self._transaction() as tx:
            threads = await self._threads(tx, "id = ANY($1::bigint[])", ids)
            deleted = await tx.write("DELETE FROM messages WHERE id = ANY($1::bigint[])", ids)
            await self._rewrite_neighbours(tx, sorted(threads))
        return deleted

    async def erase_deleted_text(self) -> bool:
        """After forgetting: VACUUM the tables forgetting touched, so the deleted and
        rewritten rows' old versions leave their pages and indexes, and rebuild the search
        index (see the module's docstring for what that does not reach). Always True:
        unlike SQLite's checkpoint, nothing tells whether an older transaction kept a
        version alive; the next VACUUM (autovacuum, or the next forget) takes what this one
        could not."""
        await self._write(
            f"VACUUM {', '.join(FORGETTING_TABLES)}", allowed_seconds=MAINTENANCE_TIMEOUT_SECONDS
        )
        # a GIN index keeps a term as a key after VACUUM emptied its posting list: only a
        # new index leaves the term out (built beside the old one, writes go on meanwhile)
        await self._write(
            "REINDEX INDEX CONCURRENTLY messages_search",
            allowed_seconds=MAINTENANCE_TIMEOUT_SECONDS,
        )
        return True
