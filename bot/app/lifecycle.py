"""Process lifecycle: the gateway built from its parts (``bot/app/build.py``), started, and
stopped cleanly.

The process is one worker (``bot/workers/worker.py``): it answers the chats it holds leases on and,
while it leads, runs the leader-only services (``bot/workers/leadership.py``). With SQLite it is the
only worker, leads from its start and recovers everything itself.

One process holds an OS lock on the data directory while it writes (``bot/app/lock.py``).
Start-up recovers what a crash left behind: ``/forget`` operations cut off halfway are
finished, replies recorded but not fully delivered are finished, and messages that never got a
reply are answered — once; replies the platform refused keep their retry schedule.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from adapters.base import Channel
from bot.app.lock import DataDirLock
from bot.config.model import Config
from bot.delivery.sender import Delivery
from bot.gateway.inbound import Gateway
from bot.services.fault_log import FaultLog
from bot.services.llm import LLMClient
from bot.services.mcp_servers import McpServers
from bot.services.speech import SpeechClient
from bot.store import Store
from bot.turn.runner import TurnRunner
from bot.turn.sessions import Sessions
from bot.workers.dispatcher import Dispatcher
from bot.workers.embedder import Embedder
from bot.workers.health import STATUS_INTERVAL_SECONDS, remove_status, write_status
from bot.workers.leadership import LeaderDuties
from bot.workers.scheduler import Scheduler
from bot.workers.shards import ShardKeeper
from bot.workers.worker import Worker
from partners.catalog import PartnerCatalog
from partners.checkins import Checkins
from partners.consolidate import Consolidator
from partners.forgetting import Forgetting
from partners.memory import MemoryFile, MemoryStore
from partners.persona import read_persona, size_report
from partners.review import Reviewer

if TYPE_CHECKING:
    from bot.web.server import WebServer

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 20.0
APPROVAL_POLL_SECONDS = 3.0
"""How soon a user approved from the terminal hears it (one small query per round)."""


@dataclass
class App:
    config: Config
    store: Store
    memory: MemoryStore
    catalog: PartnerCatalog
    llm: LLMClient
    speech: SpeechClient
    dispatcher: Dispatcher
    delivery: Delivery
    gateway: Gateway
    runner: TurnRunner
    sessions: Sessions
    reviewer: Reviewer
    consolidator: Consolidator
    checkins: Checkins
    forgetting: Forgetting
    scheduler: Scheduler
    worker: Worker
    leader_duties: LeaderDuties
    lock: DataDirLock
    channels: dict[str, Channel] = field(default_factory=dict)
    embedder: Embedder | None = None
    """Gives messages their vectors in the background, while this worker leads; None:
    ``[embeddings]`` is off."""
    status_task: asyncio.Task[None] | None = None
    approvals_task: asyncio.Task[None] | None = None
    catalog_task: asyncio.Task[None] | None = None
    web: WebServer | None = None
    shards: ShardKeeper | None = None
    mcp: McpServers | None = None
    """The ``[mcp]`` servers that turns started; stopped with the gateway."""
    """Which Discord shards this worker connects, when workers divide them
    (bot/workers/shards.py)."""

    @property
    def owner_file(self) -> MemoryFile:
        return owner_memory_file(self.config)

    async def start(self) -> None:
        """Recover, connect every channel, then work as a worker: the first heartbeat leads
        (if nobody else does) and claims every chat with pending messages."""
        for partner in self.catalog.all():
            files = await read_persona(self.memory, partner)
            logger.info(size_report(partner, self.config.memory.context_budget, files))
        await self.worker.check_id()  # before this worker touches anything another may hold
        # before anything can read or write memory again: a crash mid-/forget is finished
        if forgotten := await self.forgetting.finish_unfinished():
            logger.info("recovered: %d interrupted /forget operations finished", forgotten)
        if self.web is not None:  # before the channels: a port in use stops the start
            await self.web.start()
        await self.gateway.start_channels()
        await self.worker.start(self.dispatcher, self.leader_duties, self.reviewer)
        if self.shards is not None:  # once this worker counts among the live ones
            await self.shards.start()
        self.status_task = asyncio.create_task(self._report_status(), name="status file")
        self.approvals_task = asyncio.create_task(
            self._announce_approvals(), name="pairing approvals"
        )
        if self.catalog.rows is not None:
            self.catalog_task = asyncio.create_task(self._follow_catalog(), name="partners")

    async def _follow_catalog(self) -> None:
        """With partners in the database: load them again whenever another worker (or a
        command line) changed them, checked every heartbeat (``partners/catalog.py``)."""
        faults = FaultLog("the partner catalog", logger)
        while True:
            await asyncio.sleep(self.config.workers.heartbeat_seconds)
            try:
                await self.catalog.refresh()  # loads, indexes and publishes if it changed
            except Exception as exc:  # one check is an outer edge: the next one tries again
                faults.failed(exc)
            else:
                faults.succeeded()

    async def _report_status(self) -> None:
        """Keep data/status.json fresh for ``companion health`` (a container healthcheck)."""
        while True:
            connected = {name: channel.connected for name, channel in self.channels.items()}
            try:
                await asyncio.to_thread(write_status, self.config.data_dir, connected)
            except OSError as exc:
                logger.warning("status file not written: %s", exc)
            await asyncio.sleep(STATUS_INTERVAL_SECONDS)

    async def _announce_approvals(self) -> None:
        """Tell users approved from the terminal (``companion pairing approve``, another
        process writing to the shared database) that they are in."""
        faults = FaultLog("pairing approvals", logger)
        while True:
            try:
                await self.gateway.announce_approvals()
            except Exception as exc:  # one poll is an outer edge: the next one tries again
                faults.failed(exc)
            else:
                faults.succeeded()
            await asyncio.sleep(APPROVAL_POLL_SECONDS)

    async def stop(self) -> None:
        """Let running turns finish, disconnect channels, close everything; idempotent.

        Turns finish first: their replies go out through the channels, which must still be
        connected (a closed Discord client cannot send). Messages that arrive meanwhile are
        stored and wait, pending, for the next start."""
        if not self.lock.held:
            return
        if self.web is not None:
            await self.web.stop()
        for task in (self.approvals_task, self.catalog_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.status_task is not None:
            self.status_task.cancel()
            await asyncio.gather(self.status_task, return_exceptions=True)
            await asyncio.to_thread(remove_status, self.config.data_dir)
        if self.shards is not None:  # another worker connects them while turns finish
            await self.shards.stop()
        await self.dispatcher.close(SHUTDOWN_GRACE_SECONDS)
        await self.reviewer.close()  # its claims go back with the worker's leases, next
        await self.worker.stop()  # the leader's services too; other workers take over now
        for channel in self.channels.values():
            try:
                await channel.stop()
            except Exception:
                logger.exception("channel %s did not stop cleanly", channel.platform)
        if self.embedder is not None:
            await self.embedder.stop()
            await self.embedder.client.close()
        if self.mcp is not None:  # after the dispatcher: no turn calls a tool any more
            await self.mcp.aclose()
        await self.llm.close()
        await self.speech.close()
        await self.store.close()
        self.lock.release()


def owner_memory_file(config: Config) -> MemoryFile:
    return MemoryFile(config.data_dir / "owner", "MEMORY.md")
