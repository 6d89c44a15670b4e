"""What only the leading worker runs (DESIGN.md "Several workers"), started when this worker
becomes leader and stopped when it stops leading: the scheduler (the review sweep and nightly
pass, which only mark reviews due for any worker to run, check-ins, reminders) under the
leader's epoch, the finishing of greetings and check-ins a crash cut off (a turn's reply is
finished by whoever holds its chat's queue key), the retry loop of refused replies (each
sent under its chat's queue-key lease, see :mod:`bot.delivery`), the background embedder (one
embedder for the database: each message is sent to the embeddings endpoint once), and each
channel's leader duties (Telegram's poller and
command menu, Discord's command sync). A lone worker leads from its start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from adapters.base import Channel, LeadingChannel
from bot.delivery import Delivery
from bot.embedder import Embedder
from bot.scheduler import Scheduler
from bot.store import Leader

logger = logging.getLogger(__name__)

STEP_DOWN_GRACE_SECONDS = 20.0
"""How long a delivery retry under way may finish when this worker stops leading."""


class LeaderDuties:
    """The leader-only services of one gateway process (:class:`bot.workers.LeaderServices`)."""

    def __init__(
        self,
        scheduler: Scheduler,
        delivery: Delivery,
        channels: dict[str, Channel],
        reviews_on: Callable[[], bool],
        embedder: Embedder | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.delivery = delivery
        self.channels = channels
        self.reviews_on = reviews_on
        """Whether reviews run at all (the owner's /admin settings override decides)."""
        self.embedder = embedder
        """Gives messages their vectors; None: ``[embeddings]`` is off."""

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

    def _leading(self) -> list[LeadingChannel]:
        return [c for c in self.channels.values() if isinstance(c, LeadingChannel)]
