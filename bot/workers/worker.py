"""This process as one worker among several on one database (docs/architecture.md "Several
workers").

A worker registers itself, holds its liveness (on PostgreSQL a connection of its own whose
advisory lock goes when the process dies, so another worker takes its chats and leadership
over at once instead of when they lapse) and then, every ``workers.heartbeat_seconds``,
beats: its registry row is stamped and the leases it knows about renewed (a lease row under
its id that it does not know about is given back), it takes or renews the leadership, and it
sweeps for queue keys that nobody holds with pending messages or a reply whose delivery was
cut off (also those whose holder stopped renewing or died: such a lease is taken over under a
new epoch). Between beats it claims a key when the gateway stored a message for it and when
PostgreSQL says another worker did (a wake-up only, heard on the liveness connection: the rows
are the truth). A claimed key goes to the dispatcher, which works it in order and releases it
when nothing is pending.

The liveness connection can be lost while the worker lives (PostgreSQL restarted, the
network): the worker says so once, takes a new one at once and keeps trying until it has it;
meanwhile other workers may take its chats over, which fencing makes safe.

The worker that leads runs the leader-only services (the Telegram poller, the scheduler,
command sync, delivery retries); it starts them when it becomes leader and stops them when
it loses the leadership — or when it could not renew it in time, since another worker may
lead by then. Leadership may be lost and regained any number of times; each regain starts the
services afresh. A leader whose services cannot do their work (:meth:`LeaderServices.trouble`)
gives the leadership up while another worker is alive: it stops them, stops renewing, and
stays away for a lease after its own has run out, so that another worker takes over and
tries; if none did, it leads again, afresh.

The leases it holds — on chats, on a refused reply's retry, on reviews — and their fencing are
:class:`~bot.workers.leases.LeaseHolder`'s (``bot/workers/leases.py``), which a worker is.

With SQLite there is one worker; it always leads and always wins its claims, on the same code
path.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Protocol

from bot.config.deployment import WorkersConfig
from bot.services.fault_log import FaultLog
from bot.store import Leader, Store, StoreError, StoreUnavailable
from bot.store.leases import Liveness
from bot.workers.dispatcher import Dispatcher
from bot.workers.leases import Clock, LeaseHolder

logger = logging.getLogger(__name__)

REOPEN_FIRST_PAUSE_SECONDS = 0.5
"""After a failed attempt to reopen the liveness connection, the pause before the next; it
doubles up to the heartbeat interval."""


class LeaderServices(Protocol):
    """What only the leader runs."""

    async def lead(self, leader: Leader) -> None:
        """This worker became leader (under ``leader.epoch``): start the services."""

    async def follow(self) -> None:
        """This worker no longer leads (or cannot tell): stop the services."""

    def trouble(self) -> str | None:
        """Why the services cannot do the leader's work, once that has lasted long enough
        to let another worker try; None while they can."""


class Reviews(Protocol):
    """Where the heartbeat has due reviews claimed and run (:class:`partners.review.Reviewer`)."""

    async def sweep(self) -> int:
        """Claim due reviews no worker runs, as many as there is room for, and start them."""


def default_worker_id() -> str:
    """host-pid: unique among running workers, and readable in ``/admin status``."""
    return f"{socket.gethostname()}-{os.getpid()}"


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (signal 0 checks without sending)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True


class Worker(LeaseHolder):
    """This process as a worker: its registration, liveness, heartbeat and leadership, over
    the leases it holds."""

    def __init__(
        self,
        store: Store,
        settings: WorkersConfig,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(store, settings, settings.id or default_worker_id(), clock)
        self._leader: Leader | None = None
        self._leader_deadline = 0.0
        self._away_until = 0.0
        """Until when (this worker's clock) it does not take the leadership: it gave it up."""
        self._dispatcher: Dispatcher | None = None
        self._services: LeaderServices | None = None
        self._reviews: Reviews | None = None
        self._beating: asyncio.Task[None] | None = None
        self._liveness: Liveness | None = None
        self._reopening: asyncio.Task[None] | None = None
        self._beat_faults = FaultLog(f"worker {self.id}: the heartbeat", logger)
        self._reopen_faults = FaultLog(f"worker {self.id}: reopening its liveness", logger)

    @property
    def leader(self) -> Leader | None:
        """This worker's leadership while it holds it (the epoch fences leader-only writes)."""
        return self._leader

    # ---- lifecycle -----------------------------------------------------------------------

    async def start(
        self, dispatcher: Dispatcher, services: LeaderServices, reviews: Reviews | None = None
    ) -> None:
        """Register, beat once (so a lone worker leads and resumes its chats at once), then
        keep beating and listening for other workers' messages. ``dispatcher`` works the keys
        this worker claims; ``services`` run while it leads; ``reviews`` runs the due reviews
        each beat claims."""
        self._dispatcher = dispatcher
        self._services = services
        self._reviews = reviews
        await self.store.register_worker(self.id, socket.gethostname(), os.getpid())
        await self._let_the_dead_go()
        self._liveness = await self.store.hold_liveness(
            self.id, dispatcher.notify, self._liveness_lost
        )
        await self.beat()
        self._beating = asyncio.create_task(self._beat_forever(), name="worker heartbeat")
        logger.info("worker %s started", self.id)

    async def check_id(self) -> None:
        """Before anything starts: :class:`StoreError` if a live worker already runs under
        this worker's id (two workers under one id would take each other's chats and
        leadership as their own)."""
        for worker in await self.store.workers():
            if worker.worker_id == self.id and worker.alive:
                raise StoreError(
                    f"another worker already runs under the id {self.id!r} (on "
                    f"{worker.host}, process {worker.pid}): give each worker its own "
                    "[workers] id, or leave it unset (host name and process id)"
                )

    async def stop(self) -> None:
        """Stop beating and leading, and let go of every lease at once (the dispatcher has
        finished its turns by now), so other workers take over without waiting."""
        task, self._beating = self._beating, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        reopening, self._reopening = self._reopening, None
        if reopening is not None:
            reopening.cancel()
            await asyncio.gather(reopening, return_exceptions=True)
        await self._step_down()
        # only now: without its lock this worker looks dead, and the leader's services it
        # ran must have stopped before another worker may start them
        if self._liveness is not None:
            await self._liveness.close()
            self._liveness = None
        self._held.clear()
        try:
            await self.store.leave(self.id)  # every lease goes back at once
        except StoreUnavailable as exc:  # they lapse by themselves within a lease
            logger.warning("worker %s left without giving its leases back: %s", self.id, exc)

    async def _let_the_dead_go(self) -> None:
        """Free at once what workers that died on this host held (a restart after kill -9,
        always the case with SQLite, whose data directory one process holds), instead of
        waiting for their leases to lapse. Workers elsewhere are left to their leases."""
        host = socket.gethostname()
        for worker in await self.store.workers():
            if (
                worker.host == host
                and worker.worker_id != self.id
                and not process_alive(worker.pid)
            ):
                logger.info("worker %s: %s died; its chats are free", self.id, worker.worker_id)
                await self.store.leave(worker.worker_id)

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            try:
                await self.beat()
            except Exception as exc:  # one beat is an outer edge: the next one tries again
                self._beat_faults.failed(exc)
                await self._lapse()
            else:
                self._beat_faults.succeeded()

    async def beat(self) -> None:
        """Check the liveness connection, renew the registry row and the leases (review
        claims too), lead if possible, then sweep for chats and for due reviews."""
        if self._liveness is not None and not await self._liveness.check():
            self._liveness_lost()
        started = await self._renew()
        await self._let_idle_go(started)
        await self._lead(started)
        await self.sweep()
        if self._reviews is not None:
            await self._reviews.sweep()

    async def sweep(self) -> int:
        """Claim what nobody works on (as many keys as the dispatcher has room for) and hand
        each to the dispatcher; how many."""
        dispatcher = self._dispatcher
        if dispatcher is None or dispatcher.free_slots <= 0:
            return 0
        leases = await self._claim_free(dispatcher.free_slots)
        for lease in leases:
            dispatcher.adopt(lease)
        return len(leases)

    # ---- liveness ------------------------------------------------------------------------

    def _liveness_lost(self) -> None:
        """The liveness connection went (or stopped answering): say so once and take a new
        one until it is back. Meanwhile this worker looks dead to the others, which may take
        its chats and the leadership over; fencing stops whatever it was doing on them."""
        if self._liveness is None or (self._reopening is not None and not self._reopening.done()):
            return
        logger.warning(
            "worker %s: lost its liveness connection; other workers may take its chats over"
            " until it is back",
            self.id,
        )
        self._reopening = asyncio.create_task(self._reopen(), name="worker liveness")

    async def _reopen(self) -> None:
        pause = REOPEN_FIRST_PAUSE_SECONDS
        while self._liveness is not None:
            try:
                await self._liveness.reopen()
            except StoreUnavailable:
                pass  # the database is away: said once already, tried again below
            except Exception as exc:  # this task is an outer edge: nobody else would see it
                self._reopen_faults.failed(exc)
            else:
                self._reopen_faults.succeeded()
                logger.info("worker %s: liveness connection reopened", self.id)
                return
            await asyncio.sleep(pause)
            pause = min(pause * 2, self.settings.heartbeat_seconds)

    # ---- the leadership ------------------------------------------------------------------

    async def _lead(self, started: float) -> None:
        if started < self._away_until or await self._gave_up():
            return  # another worker's turn to take the leadership
        leader = await self.store.lead(self.id, self.settings.lease_seconds)
        if leader.worker_id != self.id:
            await self._step_down()
            return
        if self._leader is not None and self._leader.epoch != leader.epoch:
            await self._step_down()  # it lapsed meanwhile: whatever ran under it stops first
        self._leader_deadline = started + self.settings.lease_seconds
        if self._leader is None:
            self._leader = leader
            logger.info("worker %s leads (epoch %d)", self.id, leader.epoch)
            if self._services is not None:
                await self._services.lead(leader)

    async def _gave_up(self) -> bool:
        """Give the leadership up if its services cannot do their work and another worker is
        alive to try: stop them and let the leadership lapse, unrenewed."""
        if self._leader is None or self._services is None:
            return False
        trouble = self._services.trouble()
        if trouble is None or not await self._others_alive():
            return False
        logger.warning(
            "worker %s gives the leadership up: %s; another worker takes it over", self.id, trouble
        )
        # the leadership lapses at its deadline; then the others have a whole lease to take it
        self._away_until = self._leader_deadline + self.settings.lease_seconds
        await self._step_down()
        return True

    async def _others_alive(self) -> bool:
        """Whether another worker holds its liveness (never on SQLite: one worker, unknown)."""
        return any(w.alive and w.worker_id != self.id for w in await self.store.workers())

    async def _lapse(self) -> None:
        """After a failed heartbeat: a leadership this worker could not renew in time may be
        another's by now, so its services stop."""
        if self._leader is not None and self.clock() >= self._leader_deadline:
            logger.warning("worker %s: leadership not renewed in time; stepping down", self.id)
            await self._step_down()

    async def _step_down(self) -> None:
        leader, self._leader = self._leader, None
        if leader is not None:
            logger.info("worker %s no longer leads (epoch %d)", self.id, leader.epoch)
            if self._services is not None:
                await self._services.follow()
