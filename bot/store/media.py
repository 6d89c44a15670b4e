"""Voice notes and photos of messages (by platform file id, never the file) and the actions
of replies (a reaction, a sticker, a voice bubble). One query text for both backends, but
for reading a set of messages' media: :class:`SqliteMedia` here (rowid order), and
:mod:`bot.store.postgres.media` (an array parameter, ``seq`` order)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

from bot.store.base import StoreBase
from bot.store.rows import MediaRow, NewMedia

MEDIA_COLUMNS = "message_id, kind, ref, mime, seconds, bytes, filename, state"


def by_message(rows: Iterable[Sequence[Any]]) -> dict[int, list[MediaRow]]:
    """Media rows (:data:`MEDIA_COLUMNS`) grouped by their message, in the order given."""
    found: dict[int, list[MediaRow]] = {}
    for row in rows:
        found.setdefault(int(row[0]), []).append(MediaRow(*row))
    return found


class Media(StoreBase):
    """Media rows of messages."""

    @abstractmethod
    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        """The media (or reply actions) of these messages, in the order they were stored."""

    async def add_media(self, message_id: int, media: Sequence[NewMedia]) -> None:
        await self._write_many(
            "INSERT INTO media (message_id, kind, ref, mime, seconds, bytes, filename)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(message_id, x.kind, x.ref, x.mime, x.seconds, x.bytes, x.filename) for x in media],
        )

    async def set_media_state(self, message_id: int, kind: str, ref: str, state: str) -> None:
        await self._write(
            "UPDATE media SET state = ? WHERE message_id = ? AND kind = ? AND ref = ?",
            state,
            message_id,
            kind,
            ref,
        )


class SqliteMedia(Media):
    """SQLite's read of several messages' media: one ``?`` per message, rowid order."""

    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        if not message_ids:
            return {}
        marks = ", ".join("?" for _ in message_ids)
        rows = await self._all(
            f"SELECT {MEDIA_COLUMNS} FROM media WHERE message_id IN ({marks}) ORDER BY rowid",
            *message_ids,
        )
        return by_message(rows)
