"""What only the leading worker runs (docs/architecture.md "Several workers"), started when this
worker
becomes leader and stopped when it stops leading: the scheduler (the review sweep and nightly
pass, which only mark reviews due for any worker to run, check-ins, reminders) under the
leader's epoch, the finishing of greetings and check-ins a crash cut off (a turn's reply is
finished by whoever holds its chat's queue key), the retry loop of refused replies (each
sent under its chat's queue-key lease, see :mod:`bot.delivery.sender`), the background embedder (one
embedder for the database: each message is sent to the embeddings endpoint once), and each
channel's leader duties (Telegram's poller and
command menu, Discord's command sync). A lone worker leads from its start.

Each time this worker becomes leader the duties start afresh (Telegram's poller on a new HTTP
client), however often the leadership was lost and regained before. A leader that cannot do
the work (a channel's duties failing for ``leader.give_up_seconds`` without one success) says
so through :meth:`LeaderDuties.trouble`; the worker then gives the leadership up, if another
worker is alive to take it (``bot/workers/worker.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from adapters.base import Channel, LeadingChannel
from bot.delivery.sender import Delivery
from bot.store import Leader
from bot.workers.embedder import Embedder
from bot.workers.scheduler import Scheduler

logger = logging.getLogger(__name__)

STEP_DOWN_GRACE_SECONDS = 20.0
"""How long a delivery retry under way may finish when this worker stops leading."""
GIVE_UP_SECONDS = 60.0
"""``leader.give_up_seconds``'s default."""


@runtime_checkable
class FallibleDuties(Protocol):
    """A channel whose leader duties can fail for a while (Telegram's long poll)."""

    def duties_failing(self) -> tuple[float, str] | None:
        """Since when (``time.monotonic()``) its duties have failed with no success in
        between, and how they last failed; None while they work (or it has none running)."""
        ...


class LeaderDuties:
    """The leader-only services of one gateway process
    (:class:`bot.workers.worker.LeaderServices`)."""

    def __init__(
        self,
        scheduler: Scheduler,
        delivery: Delivery,
        channels: dict[str, Channel],
        reviews_on: Callable[[], bool],
        embedder: Embedder | None = None,
        give_up_seconds: float = GIVE_UP_SECONDS,
    ) -> None:
        self.scheduler = scheduler
        self.delivery = delivery
        self.channels = channels
        self.reviews_on = reviews_on
        """Whether reviews run at all (the owner's /admin settings override decides)."""
        self.embedder = embedder
        """Gives messages their vectors; None: ``[embeddings]`` is off."""
        self.give_up_seconds = give_up_seconds

    async def lead(self, leader: Leader) -> None:
        redelivered = await self.delivery.redeliver_pending()
        if redelivered:
            logger.info("recovered: %d replies re-delivered", redelivered)
        self.delivery.start()
        self.scheduler.start(leader, reviews=self.reviews_on())
        await self.scheduler.plan_reminders()
        if self.embedder is not None:
            self.embedder.start()
        for channel in self._leading():
            await channel.lead()

    async def follow(self) -> None:
        self.scheduler.shutdown()
        if self.embedder is not None:
            await self.embedder.stop()
        for channel in self._leading():
            try:
                await channel.follow()
            except Exception:  # one channel's trouble must not keep the others leading
                logger.exception("channel %s did not stop its leader duties", channel)
        await self.delivery.stop(STEP_DOWN_GRACE_SECONDS)

    def trouble(self) -> str | None:
        """What keeps this worker from the leader's work, once a channel's duties have failed
        for ``give_up_seconds`` with no success in between; None while they work."""
        now = time.monotonic()
        for name, channel in self.channels.items():
            failing = channel.duties_failing() if isinstance(channel, FallibleDuties) else None
            if failing is not None and now - failing[0] >= self.give_up_seconds:
                since, how = failing
                return f"{name} has failed for {now - since:.0f} s ({how})"
        return None

    def _leading(self) -> list[LeadingChannel]:
        return [c for c in self.channels.values() if isinstance(c, LeadingChannel)]
