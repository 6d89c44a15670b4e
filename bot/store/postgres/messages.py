"""Messages on PostgreSQL where they differ (the rest is :mod:`bot.store.messages`): waking
the workers that listen when a stored message waits for a turn, and the order rows were
stored in (an identity column ``seq``; SQLite has its rowid)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.messages import Messages
from bot.store.postgres.wakeups import WakeUps
from bot.store.rows import NewMessage


class PostgresMessages(Messages):
    """Recording messages, the other workers woken once a pending one has committed."""

    _INSERTION_ORDER = "seq"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_ups = WakeUps(self._write)

    async def _wake_workers(self, stored: Sequence[NewMessage]) -> None:
        """Wake the workers listening for pending messages, once the insert has committed
        (:mod:`bot.store.postgres.wakeups` says why not inside it)."""
        await self._wake_ups.wake(
            m.queue_key for m in stored if m.status == "pending" and m.queue_key
        )
