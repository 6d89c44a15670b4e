"""Which of the Discord bot's shards this worker connects, when several workers share one
PostgreSQL database (docs/architecture.md "Several workers": Discord shards are leases too).

Each shard is a lease in the database with a fencing epoch (:meth:`bot.store.Store.
claim_shards`). Every ``workers.heartbeat_seconds`` the :class:`ShardKeeper` renews the shards
it holds and works out its share: ceil(shards / workers), counting the workers that take a
share of this bot's shards (:meth:`bot.store.Store.join_shards`; not one without Discord or
given its shards by the operator), beat within ``workers.lease_seconds`` and, on PostgreSQL,
have not died. Holding fewer, it claims free shards up to its share (a dead worker's are free
at once, a paused one's once their leases lapsed); holding more (a worker joined), it lets
one go: one per heartbeat, so the bot moves gently, and its highest, so shard 0 (every direct
message) moves last. The channel connects exactly the shards held
(:meth:`adapters.base.ShardedChannel.connect_shards`).

The order that keeps a shard from being connected by two workers at once: a shard let go is
disconnected before its lease goes back; a lease is claimed before its shard is connected;
a shard whose lease could not be renewed is disconnected a heartbeat before the lease could
lapse (:meth:`ShardKeeper._drop_overdue`, which a database that hangs does not hold up). What
no order can cover: a worker paused past its lease finds its shard taken only when it runs
again and disconnects it then — meanwhile both receive that shard's events, and the store's
deduplication makes one turn of each message.

Only for a bot with a number of shards that the operator has not divided
(:func:`shards_leased`): with ``discord.shard_ids`` each worker connects the shards it was given
and no lease is taken; with ``discord.shards = "auto"`` each worker would ask Discord for the
count on its own (and might hear different ones), so every worker connects every shard; and a
bot without ``discord.shards`` (one shard: what a bot in fewer than 2,500 servers runs) is
connected by every worker, so a worker's death loses no event — Discord replays nothing to a
new connection, and the store's deduplication makes one turn of each message all the same. As
with SQLite, whose one process connects every shard itself.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from adapters.base import Channel, ShardedChannel
from bot.config.deployment import WorkersConfig
from bot.config.model import Config
from bot.store import ShardLease, Store, StoreUnavailable

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


def shards_leased(config: Config) -> bool:
    """Whether this worker's Discord shards are leases: several workers may share the database,
    the bot has a number of shards and the operator has not divided them (see the module's
    docstring)."""
    discord = config.discord
    return (
        config.storage.database_url is not None
        and discord.shard_ids is None
        and isinstance(discord.shards, int)
    )


@dataclass
class _Held:
    """A shard this worker holds, and until when by its own clock (counted from before the
    claim or renewal was sent, so never later than the database's expiry)."""

    lease: ShardLease
    deadline: float


class ShardKeeper:
    """The shard leases of this worker and the connections that follow them."""

    def __init__(
        self,
        store: Store,
        channel: ShardedChannel,
        shard_count: int,
        worker_id: str,
        settings: WorkersConfig,
        clock: Clock = time.monotonic,
    ) -> None:
        self.store = store
        self.channel = channel
        self.shard_count = shard_count
        self.worker_id = worker_id
        self.settings = settings
        self.clock = clock
        self._held: dict[int, _Held] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._failing = False
        """A beat failed and none succeeded since (its fault is logged once)."""

    @property
    def held(self) -> list[int]:
        """The shards this worker holds (and connects)."""
        return sorted(self._held)

    async def start(self) -> None:
        """Take this worker's share at once, then keep beating (after :meth:`bot.workers.worker.
        Worker.start`, whose registry row it joins to the bot's shards)."""
        await self.store.join_shards(self.worker_id, self.shard_count)
        await self.beat()
        self._tasks = [
            asyncio.create_task(self._beat_forever(), name="discord shard leases"),
            asyncio.create_task(self._guard_forever(), name="discord shard deadlines"),
        ]

    async def stop(self) -> None:
        """Disconnect every shard, then give the leases back, so other workers take the
        shards over at their next heartbeat."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        leases = [held.lease for held in self._held.values()]
        self._held.clear()
        try:
            await self.channel.connect_shards(())
        except Exception:  # stopping is an outer edge; the client closes next anyway
            logger.exception("worker %s: Discord shards not disconnected", self.worker_id)
            return  # their leases lapse (or go with this worker's liveness) meanwhile
        try:
            await self.store.release_shards(leases)
        except StoreUnavailable as exc:  # they lapse by themselves within a lease
            logger.warning("worker %s left without giving its shards back: %s", self.worker_id, exc)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            try:
                await self.beat()
            except Exception:  # one beat is an outer edge: the next one tries again
                if not self._failing:
                    logger.exception("worker %s: Discord shard heartbeat failed", self.worker_id)
                self._failing = True
            else:
                if self._failing:
                    logger.info("worker %s: Discord shard heartbeat works again", self.worker_id)
                self._failing = False

    async def beat(self) -> None:
        """Renew the shards held, take up to this worker's share or let one go above it,
        and have the channel connect what is held."""
        await self._renew()
        share = await self._share()
        if len(self._held) > share:
            await self._let_one_go()
        elif len(self._held) < share:
            await self._claim(share - len(self._held))
        await self.channel.connect_shards(self.held)

    async def _renew(self) -> None:
        started = self.clock()
        leases = [held.lease for held in self._held.values()]
        renewed = {
            lease.shard_id: lease
            for lease in await self.store.renew_shards(
                self.worker_id, self.settings.lease_seconds, leases
            )
        }
        for shard_id, held in list(self._held.items()):
            lease = renewed.get(shard_id)
            if lease is None or lease.epoch != held.lease.epoch:
                logger.warning(
                    "worker %s: Discord shard %d was taken over", self.worker_id, shard_id
                )
                del self._held[shard_id]
            else:
                held.deadline = started + self.settings.lease_seconds

    async def _share(self) -> int:
        workers = await self.store.shard_workers(self.shard_count, self.settings.lease_seconds)
        return math.ceil(self.shard_count / max(1, workers))

    async def _claim(self, count: int) -> None:
        started = self.clock()
        claimed = await self.store.claim_shards(
            self.worker_id, self.shard_count, self.settings.lease_seconds, count
        )
        for lease in claimed:
            self._held[lease.shard_id] = _Held(lease, started + self.settings.lease_seconds)
            logger.info(
                "worker %s takes Discord shard %d of %d (epoch %d)",
                self.worker_id,
                lease.shard_id,
                self.shard_count,
                lease.epoch,
            )

    async def _let_one_go(self) -> None:
        """Give the highest shard back: disconnected first, then released. While it is still
        connecting it waits for a later beat (it could not be closed at once)."""
        highest = self.held[-1]
        if highest not in self.channel.connected_shards:
            return
        held = self._held.pop(highest)
        await self.channel.connect_shards(self.held)
        await self.store.release_shards([held.lease])
        logger.info(
            "worker %s lets Discord shard %d go to a worker with fewer",
            self.worker_id,
            held.lease.shard_id,
        )

    # ---- deadlines ---------------------------------------------------------------------

    async def _guard_forever(self) -> None:
        """Wake when the earliest shard would become overdue and drop what is by then."""
        while True:
            due = min((held.deadline for held in self._held.values()), default=None)
            now = self.clock()
            margin = self.settings.heartbeat_seconds
            wait = self.settings.heartbeat_seconds if due is None else due - margin - now
            await asyncio.sleep(max(wait, margin / 10))
            try:
                await self._drop_overdue()
            except Exception:  # the next wake-up tries again
                logger.exception("worker %s: overdue Discord shards not dropped", self.worker_id)

    async def _drop_overdue(self) -> None:
        """Disconnect the shards whose lease would lapse within a heartbeat without a renewal
        in time (the database is away or hangs): another worker may take them then. Their
        leases lapse by themselves."""
        limit = self.clock() + self.settings.heartbeat_seconds
        overdue = [shard_id for shard_id, held in self._held.items() if held.deadline <= limit]
        if not overdue:
            return
        for shard_id in overdue:
            del self._held[shard_id]
        logger.warning(
            "worker %s: Discord shards %s not renewed in time; disconnecting them",
            self.worker_id,
            ", ".join(map(str, overdue)),
        )
        await self.channel.connect_shards(self.held)


def shard_keeper(
    store: Store, channels: Mapping[str, Channel], worker_id: str, settings: WorkersConfig
) -> ShardKeeper | None:
    """The keeper of the channel whose shards the gateway assigns, if there is one."""
    for channel in channels.values():
        if isinstance(channel, ShardedChannel) and channel.assigned_shards is not None:
            return ShardKeeper(store, channel, channel.assigned_shards, worker_id, settings)
    return None
