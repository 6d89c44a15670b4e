"""The background embedder: gives stored messages and journal entries their vectors.

An asyncio task that runs, when ``[embeddings]`` is set, on the leading worker only (started and
stopped with the other leader duties, :mod:`bot.workers.leadership`): several workers on one
database share one backlog, and one embedder reading it sends each message to the endpoint once.
With SQLite the one process leads from its start. The store wakes it whenever this process stores a
searchable message (:attr:`Store.new_searchable`: setting an event, nothing more, so the turn that
stored the message does not wait). Messages other workers store do not wake it: its idle pass
(:data:`IDLE_SECONDS`) finds them. That delay is accepted: a vector only adds semantic recall to a
message that keyword search finds from the moment it is stored, and waking the leader across
processes would need a notification on every stored message (PostgreSQL's ``companion_pending``
only covers messages waiting for a turn, not replies).

It reads what the store lists as not embedded yet (new messages past its watermark, and
messages whose text changed), sends them to the endpoint in batches of
``embeddings.batch_size`` and stores the vectors. It is never on the reply path: a turn stores
its messages and goes on; their vectors come a moment later. When the endpoint is down or slow
the backlog simply waits: the embedder backs off (doubling up to ``RETRY_MAX_SECONDS``) and
tries again, and search answers lexically meanwhile; so does an answer wrong as a whole
(:mod:`bot.services.embeddings`), and a store that is away. A text the endpoint refuses, or answers
no usable vector for (NaN, strings, another size), is skipped, and the rest of its batch stored,
so one odd message cannot stall the rest. Failures are logged once per episode
(:mod:`bot.services.fault_log`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from bot.services.embeddings import (
    EmbeddingsClient,
    EmbeddingsRejected,
    EmbeddingsUnavailable,
    Unusable,
)
from bot.services.fault_log import FaultLog
from bot.store import NewVector, Store

logger = logging.getLogger(__name__)

IDLE_SECONDS = 60.0
"""How often an idle embedder looks for new messages although nobody woke it: the store wakes
it whenever this process stores a searchable message, so this catches rows written by other
workers (at most this late) and rows that committed after later ones (see the PostgreSQL
store's ``embedding_work``); one cheap query of the newest ids."""
RETRY_FIRST_SECONDS = 2.0
RETRY_MAX_SECONDS = 300.0


class Embedder:
    """Embeds the store's backlog, batch by batch, for one model."""

    def __init__(
        self,
        store: Store,
        client: EmbeddingsClient,
        batch_size: int,
        *,
        idle_seconds: float = IDLE_SECONDS,
        retry_first_seconds: float = RETRY_FIRST_SECONDS,
        retry_max_seconds: float = RETRY_MAX_SECONDS,
    ) -> None:
        self.store = store
        self.client = client
        self.batch_size = batch_size
        self.idle_seconds = idle_seconds
        self.retry_first_seconds = retry_first_seconds
        self.retry_max_seconds = retry_max_seconds
        self.faults = FaultLog("embedding", logger)
        self.pause_seconds = 0.0
        """The pause after the last failed batch before the next try (0 after a success)."""
        self._wake = asyncio.Event()
        """Set by :meth:`wake`: ends any pause, a back-off too."""
        self.idle = False
        """Waiting for new messages (the backlog is empty)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is not None:
            return
        self._task = asyncio.create_task(self._run(), name="embedder")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        """Look for new messages now, even in the middle of a back-off."""
        self._wake.set()

    @property
    def failures(self) -> int:
        """Batches failed in a row (0: the endpoint and the store answer)."""
        return self.faults.failures

    async def _run(self) -> None:
        stored = self.store.new_searchable
        while True:
            # cleared before the backlog is read: whatever is stored from now on wakes the
            # next idle pause, so no message waits for the idle round
            self._wake.clear()
            stored.clear()
            try:
                embedded = await self.run_once()
            except EmbeddingsUnavailable as exc:
                self.faults.failed(exc, expected=True)
                await self._pause()
                continue
            except Exception as exc:
                # the edge of a background job (the database away, a bug): keep the gateway
                # and the job alive, and try again as after an endpoint's failure
                self.faults.failed(exc)
                await self._pause()
                continue
            self.faults.succeeded()
            self.pause_seconds = 0.0
            if not embedded:
                self.idle = True
                await _first(self.idle_seconds, self._wake, stored)
                self.idle = False

    async def _pause(self) -> None:
        """Wait before the next try: the shortest pause after one failure, doubling while
        they go on (up to ``retry_max_seconds``); new messages do not cut it short."""
        doublings = min(self.faults.failures - 1, 30)
        self.pause_seconds = min(self.retry_first_seconds * 2**doublings, self.retry_max_seconds)
        await _first(self.pause_seconds, self._wake)

    async def run_once(self) -> int:
        """Embed one batch of the backlog; returns how many messages it took (0: none
        waiting). Raises EmbeddingsUnavailable when the endpoint fails (nothing is lost:
        the same messages are the backlog next time)."""
        work = await self.store.embedding_work(self.client.model, self.batch_size)
        if not work.texts:
            return 0
        vectors = await self.vectors(work.texts)
        await self.store.save_vectors(self.client.model, vectors, upto=work.upto)
        return len(work.texts)

    async def vectors(self, texts: Sequence[tuple[int, str]]) -> list[NewVector]:
        """Vectors for (message id, text) pairs; blank texts, texts the endpoint refuses and
        texts it answers no usable vector for (NaN, strings, another size) get none and are
        not asked for again (``companion reindex`` asks once more)."""
        wanted = [(i, t) for i, t in texts if t.strip()]
        await self.store.skip_embedding([i for i, t in texts if not t.strip()])
        if not wanted:
            return []
        try:
            found = await self.client.embed([t for _, t in wanted])
        except EmbeddingsRejected as exc:
            if len(wanted) == 1:
                logger.warning("message %d is not embedded: %s", wanted[0][0], exc)
                await self.store.skip_embedding([wanted[0][0]])
                return []
            half = len(wanted) // 2
            return [*await self.vectors(wanted[:half]), *await self.vectors(wanted[half:])]
        from bot.services.vectors import pack  # numpy, loaded only once embeddings are on

        vectors, unusable = [], []
        for (message_id, text), vector in zip(wanted, found, strict=True):
            if isinstance(vector, Unusable):
                logger.warning(
                    "message %d is not embedded: the endpoint's vector for it is unusable (%s)",
                    message_id,
                    vector.reason,
                )
                unusable.append(message_id)
            else:
                vectors.append(NewVector(message_id, text, vector.size, pack(vector)))
        await self.store.skip_embedding(unusable)
        return vectors


async def _first(seconds: float, *events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set, or ``seconds`` have passed."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def reindex(
    store: Store,
    client: EmbeddingsClient,
    partner_id: str | None,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Embed every searchable message (all, or one partner's) that has no vector of the
    client's model yet: the backfill after ``[embeddings]`` is set, or after its model changed
    (older models' vectors are replaced). Returns how many were embedded; raises
    EmbeddingsUnavailable if the endpoint fails (what was stored stays, and a reindex run
    again starts after it). ``progress`` hears how many messages were gone through so far."""
    embedder = Embedder(store, client, batch_size)
    done, seen, after = 0, 0, 0
    while texts := await store.unembedded(client.model, partner_id, after, batch_size):
        done += await store.save_vectors(client.model, await embedder.vectors(texts))
        after = texts[-1][0]
        seen += len(texts)
        if progress is not None:
            progress(seen)
    return done
