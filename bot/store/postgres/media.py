"""PostgreSQL's read of several messages' media (the rest is :mod:`bot.store.media`): the ids
as one array parameter, one prepared statement whatever their number, in ``seq`` order (the
order in which they were stored; SQLite has its rowid)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.media import MEDIA_COLUMNS, Media, by_message
from bot.store.rows import MediaRow


class PostgresMedia(Media):
    """Media rows of messages."""

    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        if not message_ids:
            return {}
        rows = await self._all(
            f"SELECT {MEDIA_COLUMNS} FROM media WHERE message_id = ANY($1::bigint[]) ORDER BY seq",
            list(message_ids),
        )
        return by_message(rows)
