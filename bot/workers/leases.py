"""The leases one worker holds (docs/architecture.md "Several workers"): on the queue keys it
works, on a refused reply it retries, on the reviews it runs — how each is claimed, kept idle
after its turn, checked before a chunk is sent, renewed by the heartbeat and given back. The
worker's life around them (registering, the heartbeat, the leadership, the sweep) is
``bot/workers/worker.py``.

Every write that commits a turn carries the turn's lease and is refused once another worker
took the key over; before each chunk goes to the platform, :meth:`LeaseHolder.ensure` checks the
lease (renewing it in the database when less than half of it is left by this worker's own
clock). The one window left: a worker paused after that check, for longer than the rest of its
lease, and before the platform's answer, sends that one chunk although another worker took
over and sends it too (docs/delivery.md).

A reply the platform refused is sent again under its queue key's lease as well: the leader's
retry loop takes the key for it (:meth:`LeaseHolder.retry_lease`, only while no worker holds it;
such a key has nothing pending, so the sweep never claims it) and keeps it idle afterwards,
as a turn's.

Reviews are claimed the same way (a lease on the session's review, renewed by the same
heartbeat): each beat claims due reviews nobody runs, as many as the reviewer has room for, and
hands them to it (:class:`partners.review.Reviewer`); a review claimed by a worker that died
lapses with its other leases and is claimed again by whichever worker beats next. The leader's
scheduler only marks reviews due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bot.config.deployment import WorkersConfig
from bot.store import Lease, LeaseLost, Store

logger = logging.getLogger("bot.workers.worker")
"""The worker's log: what a worker says about its leases goes under the same name as the rest."""

Clock = Callable[[], float]


@dataclass
class _Held:
    """A lease this worker holds, and until when by its own clock (counted from before the
    claim or renewal was sent, so never later than the database's expiry)."""

    lease: Lease
    deadline: float
    idle_since: float | None = None
    """Since when nothing is pending on it (None: a task works it)."""


class LeaseHolder:
    """The leases this worker holds, each with its deadline by the worker's own clock."""

    def __init__(self, store: Store, settings: WorkersConfig, worker_id: str, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.id = worker_id
        self.clock = clock
        self._held: dict[str, _Held] = {}
        self._claiming = asyncio.Lock()
        """Held by each claim and by the heartbeat's renewal, which never overlap: the
        heartbeat gives back every lease row under this worker's id that it does not know about,
        and a claim still in flight is not known yet."""

    @property
    def held(self) -> int:
        """How many leases this worker holds (queue keys and review claims)."""
        return len(self._held)

    async def claim(self, queue_key: str) -> Lease | None:
        """Lease this key if it has pending messages and no other worker holds it (a lease
        this worker kept since the key's last turn is used again as it is)."""
        kept = self._held.get(queue_key)
        if kept is not None and kept.idle_since is not None:
            kept.idle_since = None
            return kept.lease
        async with self._claiming:
            started = self.clock()
            leases = await self.store.claim_queue_keys(
                self.id, self.settings.lease_seconds, 1, queue_key
            )
            for lease in leases:
                self._hold(lease, started)
        return leases[0] if leases else None

    async def _claim_free(self, limit: int) -> list[Lease]:
        """Lease up to ``limit`` keys nobody holds that have pending messages."""
        async with self._claiming:
            started = self.clock()
            leases = await self.store.claim_queue_keys(self.id, self.settings.lease_seconds, limit)
            for lease in leases:
                self._hold(lease, started)
        return leases

    def _hold(self, lease: Lease, started: float) -> None:
        self._held[lease.queue_key] = _Held(lease, started + self.settings.lease_seconds)

    async def release(self, lease: Lease) -> None:
        """Nothing is pending on this key any more: the lease is kept idle until the next
        heartbeat gives it back (a message meanwhile uses it again)."""
        held = self._held.get(lease.queue_key)
        if held is not None and held.lease.epoch == lease.epoch:
            held.idle_since = self.clock()

    def kept(self, queue_key: str) -> Lease | None:
        """The lease kept idle on this key since its last turn, if any."""
        held = self._held.get(queue_key)
        return held.lease if held is not None and held.idle_since is not None else None

    async def give_back(self, lease: Lease) -> None:
        """Nothing is pending on this key and the dispatcher has no room for its next message:
        the lease goes back now, so another worker with room may take that message. (One
        stored before the lease went back is claimed again by this worker's own task, which
        heard of it.)"""
        held = self._held.get(lease.queue_key)
        if held is not None and held.lease.epoch == lease.epoch:
            del self._held[lease.queue_key]
            await self.store.release_leases([lease])

    def forget(self, lease: Lease) -> None:
        """Stop counting a lease that was taken over."""
        held = self._held.get(lease.queue_key)
        if held is not None and held.lease.epoch == lease.epoch:
            del self._held[lease.queue_key]

    async def ensure(self, lease: Lease) -> None:
        """Before a chunk goes to the platform: raise :class:`LeaseLost` unless the lease is
        still this worker's; renew it in the database when less than half of it is left."""
        held = self._held.get(lease.queue_key)
        if held is None or held.lease.epoch != lease.epoch:
            raise LeaseLost(f"the lease on {lease.queue_key} (epoch {lease.epoch}) was lost")
        started = self.clock()
        if held.deadline - started > self.settings.lease_seconds / 2:
            return
        try:
            await self.store.renew_lease(lease, self.settings.lease_seconds)
        except LeaseLost:
            self.forget(lease)
            raise
        held.deadline = started + self.settings.lease_seconds

    # ---- leases to retry a refused reply (bot.delivery.sender.RetryLease) -----------------------

    @contextlib.asynccontextmanager
    async def retry_lease(self, queue_key: str, message_id: int) -> AsyncIterator[Lease | None]:
        """The lease to send reply ``message_id``, which waits for a retry, under: this
        worker's own on ``queue_key`` if it holds one (a turn's, or one kept idle after it:
        within one process one task at a time sends a reply anyway), else one claimed for the
        retry and kept idle when the block ends, as a turn's is. None while another worker
        holds the key: that worker's next turn sends the reply first."""
        held = self._held.get(queue_key)
        if held is not None:
            yield held.lease
            return
        async with self._claiming:
            started = self.clock()
            lease = await self.store.claim_for_retry(
                self.id, self.settings.lease_seconds, queue_key, message_id
            )
            if lease is not None:
                self._hold(lease, started)
        try:
            yield lease
        finally:
            if lease is not None:
                await self.release(lease)

    # ---- review claims (partners.review.ReviewClaims) ------------------------------------
    # A review claim is held like a chat's lease (renewed, and checked by the heartbeat, as
    # one of the leases this worker knows), but no dispatcher works it and it is never idle.

    async def claim_review(self, session_id: str) -> Lease | None:
        async with self._claiming:
            started = self.clock()
            claim = await self.store.claim_review(self.id, session_id, self.settings.lease_seconds)
            if claim is not None:
                self._hold(claim, started)
        return claim

    async def claim_due_reviews(self, due_by: float, limit: int) -> list[Lease]:
        async with self._claiming:
            started = self.clock()
            claims = await self.store.claim_due_reviews(
                self.id, self.settings.lease_seconds, due_by, limit
            )
            for claim in claims:
                self._hold(claim, started)
        return claims

    async def keep_review(self, claim: Lease) -> None:
        # asked of the database, not of this worker's clock: one round trip per review buys
        # that a worker paused through the model's answer writes no memory once another took
        # its claim over
        started = self.clock()
        try:
            await self.store.renew_lease(claim, self.settings.lease_seconds)
        except LeaseLost:
            self.forget(claim)
            raise
        held = self._held.get(claim.queue_key)
        if held is not None and held.lease.epoch == claim.epoch:
            held.deadline = started + self.settings.lease_seconds

    async def release_review(self, claim: Lease) -> None:
        self.forget(claim)
        await self.store.release_leases([claim])

    # ---- the heartbeat's part (bot.workers.worker.Worker.beat) ---------------------------

    async def _renew(self) -> float:
        """Stamp this worker's registry row and renew every lease it knows (review claims too);
        forget those taken over. Returns when the renewal was sent, by this worker's clock."""
        async with self._claiming:
            started = self.clock()
            known = [held.lease for held in self._held.values()]
            renewed = {
                lease.queue_key: lease
                for lease in await self.store.heartbeat(self.id, self.settings.lease_seconds, known)
            }
            for key, held in list(self._held.items()):
                lease = renewed.get(key)
                if lease is None or lease.epoch != held.lease.epoch:
                    logger.warning("worker %s: the lease on %s was taken over", self.id, key)
                    del self._held[key]
                else:
                    held.deadline = started + self.settings.lease_seconds
        return started

    async def _let_idle_go(self, now: float) -> None:
        """Give back the leases idle for a heartbeat or more. A chat's lease outlives its
        turn that long, so the next message of a conversation needs no new claim."""
        idle = [
            held.lease
            for held in self._held.values()
            if held.idle_since is not None
            and now - held.idle_since >= self.settings.heartbeat_seconds
        ]
        for lease in idle:
            del self._held[lease.queue_key]
        await self.store.release_leases(idle)
