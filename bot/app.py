"""Process lifecycle: build the gateway from its parts, start it, stop it cleanly.

The process is one worker (``bot/workers/worker.py``): it answers the chats it holds leases on and,
while it leads, runs the leader-only services (``bot/workers/leadership.py``). With SQLite it is the
only worker, leads from its start and recovers everything itself.

One process holds an OS lock on the data directory while it writes; a second writer (``companion
chat`` while ``companion run`` runs) stops with a clear message. Start-up recovers what a crash
left behind: ``/forget`` operations cut off halfway are finished, replies recorded but not fully
delivered are finished, and messages that never got a reply are answered — once; replies the
platform refused keep their retry schedule.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING
from zoneinfo import ZoneInfo

from adapters.base import Channel
from bot.admin.services import AdminServices
from bot.config.memory_settings import Settings
from bot.config.model import Config
from bot.delivery.greeter import Greeter
from bot.delivery.proactive import ProactiveSender
from bot.delivery.sender import Delivery
from bot.gateway.access import Access, OwnerCheck, owner_keys
from bot.gateway.claims import OwnerClaims
from bot.gateway.inbound import Announce, Gateway
from bot.gateway.memory_documents import (
    adopt_local_files,
    adopt_local_partners,
    memory_store,
    partner_catalog,
)
from bot.services.embeddings import EmbeddingsClient
from bot.services.fault_log import FaultLog
from bot.services.llm import LLMClient
from bot.services.speech import SpeechClient
from bot.store import Store
from bot.turn.budget import Budget
from bot.turn.chat import ChatLoop
from bot.turn.media import MediaReader
from bot.turn.runner import TurnRunner
from bot.turn.sessions import Sessions
from bot.turn.tools import default_registry
from bot.turn.voice_replies import VoiceReplies
from bot.workers.dispatcher import Dispatcher
from bot.workers.embedder import Embedder
from bot.workers.health import STATUS_INTERVAL_SECONDS, remove_status, write_status
from bot.workers.leadership import LeaderDuties
from bot.workers.scheduler import Scheduler
from bot.workers.shards import ShardKeeper, shard_keeper
from bot.workers.worker import Worker
from partners.catalog import PartnerCatalog, apply_search_languages
from partners.checkins import Checkins
from partners.consolidate import Consolidator
from partners.forgetting import Forgetting
from partners.lore_books import LoreLibrary
from partners.memory import MemoryFile, MemoryStore
from partners.persona import Partner, read_persona, size_report
from partners.recall import Recall
from partners.review import Reviewer
from partners.user_memory import UserMemory

if TYPE_CHECKING:
    from bot.web.server import WebServer

logger = logging.getLogger(__name__)

LOCK_FILE = "gateway.lock"
SHUTDOWN_GRACE_SECONDS = 20.0
APPROVAL_POLL_SECONDS = 3.0
"""How soon a user approved from the terminal hears it (one small query per round)."""


class DataDirBusy(RuntimeError):
    """Another gateway process writes to this data directory."""


class DataDirLock:
    """An exclusive advisory lock (flock) held for the life of a writing process."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise DataDirBusy(
                f"{self.path.parent} is in use by a running gateway ({holder}). Stop it first, "
                "or use read-only commands (search, memory show, doctor) beside it."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        self._handle = handle

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


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
        await self.llm.close()
        await self.speech.close()
        await self.store.close()
        self.lock.release()


def owner_memory_file(config: Config) -> MemoryFile:
    return MemoryFile(config.data_dir / "owner", "MEMORY.md")


def log_announcement(lines: list[str]) -> None:
    logger.warning("%s", " ".join(line.strip() for line in lines))


async def build_app(
    config: Config, channels: dict[str, Channel], announce: Announce | None = None
) -> App:
    """Open the data directory (taking its lock) and wire every part together. ``announce``
    shows a notice on the terminal (default: a log line)."""
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    try:
        store = await Store.open(config.database)
    except BaseException:
        lock.release()
        raise
    await store.replace_config_bindings((b.platform, b.chat_id, b.partner) for b in config.bindings)
    worker = Worker(store, config.workers)
    catalog = partner_catalog(config, store, worker.id)
    await adopt_local_partners(catalog)
    created = await catalog.ensure_first()
    if created:
        logger.info("created the example partner %r (%s)", created.id, catalog.describe())
    await apply_search_languages(store, catalog)
    memory = memory_store(config, store)
    roots = [owner_memory_file(config).root, *(p.dir for p in catalog.all())]
    await adopt_local_files(memory, roots)
    await catalog.refresh()  # post-history instructions those files brought in
    llm = LLMClient(config.llm)
    embeddings = (
        EmbeddingsClient(config.embeddings, config.llm) if config.embeddings.enabled else None
    )
    embedder = Embedder(store, embeddings, config.embeddings.batch_size) if embeddings else None
    registry = default_registry()
    settings = Settings(config.memory, store)
    await settings.load()
    sessions = Sessions(store, catalog, memory, settings.memory)
    claimed = {row["user_key"] for row in await store.claimed_owners()}
    is_owner = OwnerCheck(owner_keys(config) | claimed)
    access = Access(config, store, is_owner)

    async def notify_owner(platform: str, text: str) -> None:
        await gateway.notify_owner(platform, text)

    speech = SpeechClient(config.speech, config.llm)

    def voice_of(partner_id: str | None) -> str | None:
        partner = catalog.get(partner_id) if partner_id else None
        voice = partner.preset.extra.get("voice") if partner else None
        return str(voice) if voice else None

    voice = VoiceReplies(speech, store, voice_of, config.usage_day)
    delivery = Delivery(
        store,
        channels,
        lambda pid: (p.name, p.preset.avatar, p.avatar_image) if (p := catalog.get(pid)) else None,
        config.delivery,
        notify_owner,
        voice,
        ensure_lease=worker.ensure,
        retry_lease=worker.retry_lease,
    )
    owner_zone = config.owner_timezone()

    def partner_zone(partner: Partner | None) -> ZoneInfo:
        return partner.timezone(owner_zone) if partner else owner_zone

    reviewer = Reviewer(
        store=store,
        memory=memory,
        catalog=catalog,
        llm=llm,
        settings=settings.memory,
        default_model=config.llm.model,
        is_owner=is_owner,
        notify_owner=notify_owner,
        timezone=partner_zone,
        usage_day=config.usage_day,
        claims=worker,
    )
    consolidator = Consolidator(
        store=store,
        memory=memory,
        catalog=catalog,
        llm=llm,
        reviewer=reviewer,
        settings=settings.memory,
        default_model=config.llm.model,
        timezone=partner_zone,
        usage_day=config.usage_day,
    )
    budget = Budget(store, config)
    proactive = ProactiveSender(store, delivery)
    delivery.on_unreachable = proactive.unreachable
    checkins = Checkins(
        store=store,
        catalog=catalog,
        memory=memory,
        llm=llm,
        default_model=config.llm.model,
        default_timezone=partner_zone,
        over_budget=budget.over_budget,
        send=proactive.send,
        usage_day=config.usage_day,
    )
    scheduler = Scheduler(
        reviewer, consolidator, checkins, owner_zone, config.memory.nightly, store
    )
    reviewer.on_reminders = scheduler.plan_reminders

    async def review_ended(session_ids: list[str]) -> None:
        if settings.memory().auto_memory:
            for session_id in session_ids:
                await reviewer.request(session_id)

    sessions.on_end = review_ended
    lore = LoreLibrary()
    runner = TurnRunner(
        config,
        store,
        memory,
        catalog,
        sessions,
        ChatLoop(llm, store, config.llm.max_tool_rounds),
        registry,
        delivery,
        channels,
        owner_memory_file(config),
        is_owner,
        reviewer,
        budget=budget,
        memory_settings=settings.memory,
        media=MediaReader(config, store, speech, llm, channels),
        voice=voice,
        lore=lore,
        recall=Recall.configured(store, embeddings, config.embeddings),
    )
    dispatcher = Dispatcher(store, runner.process, config.dispatch.max_concurrent_turns, worker)
    forgetting = Forgetting(store, memory, catalog)
    user_memory = UserMemory(store, memory, forgetting)
    gateway = Gateway(
        config,
        store,
        catalog,
        access,
        dispatcher,
        channels,
        sessions,
        user_memory,
        OwnerClaims(store, is_owner),
        announce or log_announcement,
        stop_turn=runner.stop,
        greeter=Greeter(store, sessions, delivery),
    )
    web = web_server(config, store, catalog, access, gateway)
    gateway.admin = AdminServices(
        memory=memory,
        owner_file=owner_memory_file(config),
        reviewer=reviewer,
        consult=runner.consult,
        sessions=sessions,
        dispatcher=dispatcher,
        channels=channels,
        next_runs=scheduler.next_runs,
        settings=settings,
        budget=budget,
        lore=lore,
        web=web,
    )
    return App(
        config,
        store,
        memory,
        catalog,
        llm,
        speech,
        dispatcher,
        delivery,
        gateway,
        runner,
        sessions,
        reviewer,
        consolidator,
        checkins,
        forgetting,
        scheduler,
        worker,
        LeaderDuties(
            scheduler,
            delivery,
            channels,
            lambda: reviewer.settings().auto_memory,
            embedder,
            config.leader.give_up_seconds,
        ),
        lock,
        channels,
        embedder=embedder,
        web=web,
        shards=shard_keeper(store, channels, worker.id, config.workers),
    )


def web_server(
    config: Config, store: Store, catalog: PartnerCatalog, access: Access, gateway: Gateway
) -> WebServer | None:
    """The owner's web page, when ``[web] enabled``."""
    if not config.web.enabled:
        return None
    # imported here: the templates' engine stays out of a gateway whose page is off
    from bot.web.actions import OwnerActions
    from bot.web.auth import WebAuth
    from bot.web.pages import WebParts
    from bot.web.server import WebServer

    actions = OwnerActions(config, store, catalog, access, gateway)
    return WebServer(config, WebParts(config, store, catalog, actions), WebAuth(store, config.web))
