"""Waking the workers that listen for pending messages (each worker's liveness connection,
:mod:`bot.store.postgres.liveness`), once the messages' insert has committed.

Not from inside the insert: NOTIFY in a transaction takes PostgreSQL's database-wide
notification lock at the commit and holds it through the commit's flush to disk, so every
inbound insert committed one at a time (``bench/notify.py``, PostgreSQL's default
durability, 64 writers: 0.41x the messages per second of inserts that notify nobody). Sent
in a transaction of its own, the lock is held for a commit that writes nothing and waits for
no disk.

Concurrent writers share their wake-ups, as a database's group commit does: one statement is
in flight at a time, and the writers whose wake-ups come meanwhile wait for it and then send
theirs together, in one statement (the same bench: 0.93x, against 0.78x with a statement
per writer). A writer's call returns once a statement that held its keys was sent, so a
worker that stored a message has woken the others before it goes on, and waits for two
statements at most. A wake-up only: the rows are the truth, and a wake-up that cannot be sent
is not the insert's failure (the message is stored; every worker's heartbeat sweep finds
it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable

from bot.store.errors import StoreUnavailable
from bot.store.postgres.liveness import PENDING_CHANNEL

WAKE_WORKERS = "SELECT pg_notify($1, queue_key) FROM unnest($2::text[]) AS queue_key"
"""One notification on the pending channel per queue key; duplicates in one transaction are
delivered once."""

Send = Callable[[str, str, list[str]], Awaitable[object]]
"""Runs a statement with its arguments (the store's own, so it counts as a round trip)."""


class WakeUps:
    """The wake-ups of one store: keys gathered for the next statement, one in flight."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._gathered: dict[str, None] = {}
        """The keys for the next statement, in order, each once."""
        self._gathering = 1
        """The number of the statement that will carry the keys gathered now (statements
        are numbered as they take the gathered keys, one at a time)."""
        self._sent = 0
        """The number of the last statement sent (or given up on)."""
        self._one_at_a_time = asyncio.Lock()

    async def wake(self, queue_keys: Iterable[str]) -> None:
        """Wake the listening workers for ``queue_keys`` (their messages have committed);
        returns once a statement holding them has been sent."""
        keys = dict.fromkeys(queue_keys)
        if not keys:
            return
        self._gathered.update(keys)
        mine = self._gathering
        async with self._one_at_a_time:
            if self._sent >= mine:
                return  # a writer that came before sent these keys with its own
            sending, self._gathered = list(self._gathered), {}
            self._gathering += 1
            try:
                with contextlib.suppress(StoreUnavailable):
                    await self._send(WAKE_WORKERS, PENDING_CHANNEL, sending)
            finally:
                self._sent = mine
