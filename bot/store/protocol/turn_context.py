"""Turn context: what a turn reads before the model runs, in one round trip
(:class:`TurnContext`).

Part of :class:`bot.store.Store`; SQLite implements it in
:class:`bot.store.turn_context.TurnContexts`, PostgreSQL in
:class:`bot.store.postgres.turn_context.TurnContexts`."""

from __future__ import annotations

from typing import Protocol

from bot.store.rows import TurnContext


class TurnContextStore(Protocol):
    """Everything a turn needs before its model call, read at once."""

    async def turn_context(self, queue_key: str, reactions: int) -> TurnContext:
        """The pending messages of ``queue_key`` and what answering them needs: the chat, the
        speaker, the open session of the last one's chat and partner with its history (and
        the carried one's), their media and at most ``reactions`` reactions since, and the
        key's unfinished replies — one round trip (see :class:`TurnContext`)."""
