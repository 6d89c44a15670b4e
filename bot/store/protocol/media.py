"""Media: voice notes and photos of messages (by platform file id, never the file) and the
actions of replies (a reaction, a sticker, a voice bubble).

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.media.Media` (reading several messages' media differs:
:class:`bot.store.media.SqliteMedia`, :class:`bot.store.postgres.media.PostgresMedia`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from bot.store.rows import MediaRow, NewMedia


class MediaStore(Protocol):
    """The media of messages and the actions of replies."""

    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        """The media (or reply actions) of these messages, in the order they were stored."""

    async def add_media(self, message_id: int, media: Sequence[NewMedia]) -> None: ...

    async def set_media_state(self, message_id: int, kind: str, ref: str, state: str) -> None: ...
