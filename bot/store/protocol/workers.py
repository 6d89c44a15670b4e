"""Workers, the leader and leases: the registry of running workers, the elected leader, the leases
on queue keys and review claims with their fencing epochs, the leases on the Discord bot's shards,
scheduled job runs, and each worker's liveness (docs/architecture.md "Several workers").

Part of :class:`bot.store.Store`; SQLite implements it in :class:`bot.store.workers.Workers`,
PostgreSQL in :class:`bot.store.postgres.workers.Workers`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from bot.store.leases import Liveness
from bot.store.worker_rows import Leader, Lease, ShardLease, WorkerRow


class WorkersStore(Protocol):
    """Several workers on one database: who runs, who leads, who holds which key."""

    async def register_worker(self, worker_id: str, host: str, pid: int) -> None:
        """Enter a starting worker in the registry; whatever an earlier process under the
        same id held (leases, shards, the leadership) is let go, since a fresh worker holds
        nothing."""

    async def heartbeat(
        self, worker_id: str, lease_seconds: float, leases: Sequence[Lease]
    ) -> list[Lease]:
        """The worker is alive: its registry row is stamped and each of ``leases`` (those it
        holds and knows about) that it still holds under that epoch is renewed for
        ``lease_seconds``; the ones renewed (one taken over is missing). A lease row under
        its id that it did not name is given back: no task of it works on that key. On
        PostgreSQL it also gives back what dead workers held (see :meth:`hold_liveness`)."""

    async def leave(self, worker_id: str) -> None:
        """A worker stopping cleanly: its leases (on shards too) are released, its leadership
        lapses at once (so another worker takes over without waiting for the expiry) and its
        row goes."""

    async def workers(self) -> list[WorkerRow]:
        """The registered workers, oldest first, with how many live leases each holds."""

    async def forget_workers_before(self, heartbeat_at: float) -> int:
        """Drop registry rows of workers silent since before ``heartbeat_at``; how many."""

    async def claim_queue_keys(
        self, worker_id: str, lease_seconds: float, limit: int, queue_key: str | None = None
    ) -> list[Lease]:
        """Lease up to ``limit`` queue keys that have pending messages or an unfinished reply
        (:attr:`TurnContext.unfinished`) and no live lease, for ``lease_seconds``, each under
        a new epoch. Two workers claiming at once never get the same key (PostgreSQL: ``FOR
        UPDATE SKIP LOCKED``; SQLite: one writer). An expired lease, or on PostgreSQL one
        whose holder died, is taken over like a free one. With ``queue_key``, only that key,
        and also if this worker's own live lease holds it (taken again under a new epoch)."""

    async def claim_for_retry(
        self, worker_id: str, lease_seconds: float, queue_key: str, message_id: int
    ) -> Lease | None:
        """Lease ``queue_key`` for ``lease_seconds`` under a new epoch to send reply
        ``message_id``, which waits for a retry and is sent under that key (the key of the turn
        that wrote it; for a reply outside every queue, a key of its chat), if no live lease
        holds the key — this worker's own neither: one of its turns may be working it. Such
        a key may have nothing pending, so :meth:`claim_queue_keys` leaves it alone; this is
        the claim of a retry (:meth:`bot.workers.worker.Worker.retry_lease`). None when the reply
        waits for no retry or the key is held."""

    async def claim_review(
        self, worker_id: str, session_id: str, lease_seconds: float
    ) -> Lease | None:
        """Claim the review of one session (a lease on :func:`review_key`) for
        ``lease_seconds`` under a new epoch, unless a live claim holds it — this worker's own
        too: one review of a session runs at a time. The heartbeat renews it like any lease
        of the worker's; :meth:`release_leases` gives it back."""

    async def claim_due_reviews(
        self, worker_id: str, lease_seconds: float, due_by: float, limit: int
    ) -> list[Lease]:
        """Claim up to ``limit`` reviews due by ``due_by`` whose claim is free (never taken,
        released, or lapsed because its worker died), the longest due first. Two workers
        claiming at once never get the same review."""

    async def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a lease still held under its epoch; :class:`LeaseLost` if it was taken
        over (checked before each chunk is sent)."""

    async def release_leases(self, leases: Sequence[Lease]) -> None:
        """Give leases back (their keys have nothing pending); their epochs are kept, so the
        next holder's is higher. A lease already taken over (or taken again) is left alone."""

    async def lease(self, queue_key: str) -> Lease | None:
        """The lease row of a queue key (a released one has no worker and has expired)."""

    async def claim_shards(
        self, worker_id: str, shard_count: int, lease_seconds: float, limit: int
    ) -> list[ShardLease]:
        """Lease up to ``limit`` of the ``shard_count`` shards of the Discord bot that no live
        lease holds (never held, released, lapsed, or on PostgreSQL one whose holder died),
        lowest shard id first (shard 0 carries every direct message), each for
        ``lease_seconds`` under a new epoch. Two workers claiming at once never get the same
        shard. A bot with another shard count has other shards (a change of
        ``discord.shards`` starts afresh)."""

    async def renew_shards(
        self, worker_id: str, lease_seconds: float, leases: Sequence[ShardLease]
    ) -> list[ShardLease]:
        """Extend each of ``leases`` that the worker still holds under its epoch by
        ``lease_seconds``; the ones renewed (one taken over is missing: another worker may
        connect that shard now). A shard lease under its id that it did not name is given
        back: it connects no such shard."""

    async def release_shards(self, leases: Sequence[ShardLease]) -> None:
        """Give shard leases back (their shards are disconnected already), free at once for
        another worker; their epochs are kept. One taken over meanwhile is left alone."""

    async def shard_leases(self, shard_count: int) -> list[ShardLease]:
        """The lease rows of a bot with ``shard_count`` shards, by shard id (a free one has
        no worker and has expired; a shard never claimed has no row)."""

    async def join_shards(self, worker_id: str, shard_count: int) -> None:
        """The registered worker takes a share of the ``shard_count`` shards of the Discord
        bot from now on (until it registers again or leaves)."""

    async def shard_workers(self, shard_count: int, within_seconds: float) -> int:
        """How many workers that joined the ``shard_count`` shards beat within the last
        ``within_seconds`` (on PostgreSQL: and have not died): among how many the shards are
        divided."""

    async def lead(self, worker_id: str, lease_seconds: float) -> Leader:
        """Take or renew the leadership for ``lease_seconds`` if it is free, lapsed, its
        holder died (PostgreSQL) or it is this worker's own; the leader row afterwards,
        whoever holds it. Renewing a live leadership keeps its epoch; taking one that lapsed
        (or whose holder died) bumps it."""

    async def leader(self) -> Leader | None:
        """The leader row, if any worker has ever led."""

    async def record_job_run(self, job: str, due: str, leader: Leader) -> bool:
        """Record that scheduled ``job`` runs for its ``due`` time, fenced by the leader's
        epoch (:class:`LeaseLost` if another worker leads now); False if some leader already
        ran it for that time, so no job runs twice across a failover."""

    async def hold_liveness(
        self, worker_id: str, wake: Callable[[str], None], lost: Callable[[], None]
    ) -> Liveness:
        """Hold the registered worker's liveness for as long as it runs. On PostgreSQL: a
        connection of its own holds a session advisory lock named in the worker's registry
        row — when the worker dies its socket closes, the lock goes, and what it held is free
        at once — and calls ``wake(queue_key)`` when any worker stores a pending message
        (LISTEN/NOTIFY: a wake-up only, the rows are the truth); ``lost()`` is called when
        that connection goes, and :meth:`Liveness.reopen` takes a new one. SQLite has one
        worker, which wakes itself: nothing is held."""
