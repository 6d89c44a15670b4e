"""Voice notes, photos and reply actions on PostgreSQL (see :mod:`bot.store.media`, whose
SQLite twin this is). SQLite gives them back in rowid order; here the ``seq`` column keeps
the order in which they were stored."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.postgres.base import PostgresBase
from bot.store.rows import MediaRow, NewMedia


class Media(PostgresBase):
    """Media rows of messages."""

    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        """The media (or reply actions) of these messages, in the order they were stored."""
        if not message_ids:
            return {}
        rows = await self._all(
            "SELECT message_id, kind, ref, mime, seconds, bytes, filename, state FROM media"
            " WHERE message_id = ANY($1::bigint[]) ORDER BY seq",
            list(message_ids),
        )
        found: dict[int, list[MediaRow]] = {}
        for row in rows:
            found.setdefault(int(row[0]), []).append(MediaRow(*row))
        return found

    async def add_media(self, message_id: int, media: Sequence[NewMedia]) -> None:
        if not media:
            return
        async with self._transaction() as tx:
            await tx.write_many(
                "INSERT INTO media (message_id, kind, ref, mime, seconds, bytes, filename)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                [
                    (message_id, x.kind, x.ref, x.mime, x.seconds, x.bytes, x.filename)
                    for x in media
                ],
            )

    async def set_media_state(self, message_id: int, kind: str, ref: str, state: str) -> None:
        await self._write(
            "UPDATE media SET state = $1 WHERE message_id = $2 AND kind = $3 AND ref = $4",
            state,
            message_id,
            kind,
            ref,
        )
