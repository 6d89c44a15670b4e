"""The Discord bot's shards this process connects when the gateway assigns them (several
workers dividing the bot's shards through the database), changed while the client runs.

discord.py's AutoShardedClient launches the shards it was given when it connects; this module
starts it with the first shard assigned and launches each further one into the running client
with its ``launch_shard`` (public, though not in discord.py's documentation: it is what
``connect`` calls for every shard). A shard no longer assigned is closed with the documented
``ShardInfo.disconnect`` (code 1000, so Discord ends its session instead of keeping it for a
resume). The client itself, and its REST session, stay up throughout: replies go out while
shards come and go.

Order: :meth:`ShardConnections.connect` returns once the shards not named are closed, and
from then on nothing they receive reaches the gateway (:meth:`ShardConnections.holds`). A
shard that discord.py was reconnecting by itself at that moment, or one still connecting,
is closed again as soon as its connection is up (:meth:`ShardConnections.unassigned_up`).

IDENTIFYs are spaced :data:`IDENTIFY_INTERVAL_SECONDS` apart from this process's previous
one, not from every launch: discord.py waits 5 s before every IDENTIFY but a client's first,
which would add 5 s to every shard a worker takes over from a dead one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Collection
from typing import Any

import discord
from discord.gateway import DiscordWebSocket

logger = logging.getLogger(__name__)

IDENTIFY_INTERVAL_SECONDS = 5.0
"""Discord accepts one IDENTIFY per 5 s from a bot (its ``max_concurrency`` of 1)."""


class PacedShardsClient(discord.AutoShardedClient):
    """An AutoShardedClient whose IDENTIFYs are at least ``identify_interval`` seconds apart,
    counted from the previous one of this client (its documented ``before_identify_hook``)."""

    def __init__(self, *, identify_interval: float, **options: Any) -> None:
        super().__init__(**options)
        self.identify_interval = identify_interval
        self._identified_at = -math.inf
        self._identifying = asyncio.Lock()

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        del shard_id, initial  # every IDENTIFY of this client is paced alike
        async with self._identifying:
            wait = self._identified_at + self.identify_interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self._identified_at = time.monotonic()


class ShardConnections:
    """Which shards a :class:`PacedShardsClient` connects: the assigned ones, launched one at a
    time in the background; the others closed."""

    def __init__(self, client: PacedShardsClient) -> None:
        self.client = client
        self.assigned: frozenset[int] = frozenset()
        self.running: asyncio.Task[None] | None = None
        """The client's ``connect()``, from the first shard on: it also runs discord.py's own
        reconnects of every shard."""
        self._launched: set[int] = set()
        """Shards launched (or being launched) and not closed since."""
        self._in_flight: int | None = None
        """The shard being launched now: closed, if need be, once its connection is up."""
        self._launching: asyncio.Task[None] | None = None
        self._changing = asyncio.Lock()

    def holds(self, shard_id: int) -> bool:
        """Whether events of this shard are this process's to hand over."""
        return shard_id in self.assigned

    @property
    def up(self) -> list[int]:
        """The shards whose connection is open now."""
        return sorted(k for k, info in self.client.shards.items() if not info.is_closed())

    async def connect(self, shard_ids: Collection[int]) -> None:
        """Connect exactly ``shard_ids`` from now on (see the module's docstring)."""
        async with self._changing:
            self.assigned = frozenset(shard_ids)
            for shard_id in sorted(self._launched - self.assigned):
                if shard_id != self._in_flight:
                    self._launched.discard(shard_id)
                    await self._close(shard_id)
            if self.assigned - self._launched and not self._busy():
                self._launching = asyncio.create_task(self._launch(), name="discord shards")

    def unassigned_up(self, shard_id: int) -> None:
        """A shard's connection came up (its READY arrived, or it RESUMED): one no longer
        assigned is closed."""
        if not self.holds(shard_id):
            task = asyncio.create_task(self._close_unassigned(shard_id), name="discord shard")
            task.add_done_callback(_log_failure)

    async def stop(self) -> None:
        """Stop launching (the client's close() closes the shards)."""
        launching, self._launching = self._launching, None
        if launching is not None:
            launching.cancel()
            await asyncio.gather(launching, return_exceptions=True)

    def _busy(self) -> bool:
        return self._launching is not None and not self._launching.done()

    async def _launch(self) -> None:
        while missing := sorted(self.assigned - self._launched):
            if self.client.is_closed():  # stopped, or ended by Discord (logged): nothing to add
                return
            shard_id = self._in_flight = missing[0]
            self._launched.add(shard_id)
            try:
                if self.running is None:
                    await self._start_client(shard_id)
                else:
                    await self.client.launch_shard(DiscordWebSocket.DEFAULT_GATEWAY, shard_id)
            finally:
                self._in_flight = None
            if not self.holds(shard_id):  # let go while it was connecting
                await self._close_unassigned(shard_id)

    async def _start_client(self, shard_id: int) -> None:
        """The first shard: ``connect()`` launches it and then runs the client; returns once
        that shard's READY came (or the client ended)."""
        self.client.shard_ids = [shard_id]
        ready = asyncio.ensure_future(
            self.client.wait_for("shard_connect", check=lambda connected: connected == shard_id)
        )
        self.running = asyncio.create_task(self.client.connect(), name="discord gateway")
        self.running.add_done_callback(_log_end)
        try:
            await asyncio.wait({ready, self.running}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()

    async def _close_unassigned(self, shard_id: int) -> None:
        async with self._changing:
            if not self.holds(shard_id):
                self._launched.discard(shard_id)
                await self._close(shard_id)

    async def _close(self, shard_id: int) -> None:
        shard = self.client.get_shard(shard_id)
        if shard is not None and not shard.is_closed():
            await shard.disconnect()
            logger.info("discord: shard %d disconnected", shard_id)


def gateway_ended(error: BaseException | None) -> str:
    """What the owner is told when the gateway connection ended for good, and what to do."""
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return (
            "Discord refused the Message Content intent: switch on 'Message Content Intent' "
            "under Bot -> Privileged Gateway Intents in the Developer Portal"
        )
    return f"the Discord gateway connection ended: {error!r}"


def _log_end(task: asyncio.Task[None]) -> None:
    """The client's connect() ended by itself (closing the client ends it without error)."""
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.error("discord: %s", gateway_ended(error))


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        logger.error("discord: a shard no longer assigned was not closed", exc_info=error)
