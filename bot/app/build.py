"""Building the gateway in order: each part is built once what it needs exists, and gets it in
its constructor; nothing is patched into a part afterwards (``tests/test_layers.py`` holds this
module to that). The owner's notices come first, since delivery, reviews and the gateway all
tell the owner things. Each builder returns a small frozen group the next ones draw on:

opened data (lock, store, worker, partners, memory, settings) -> outside services (model,
speech, embeddings) -> the owner (who it is, access, notices) -> sending (voice, delivery,
check-ins' sender) -> memory work (reviews, consolidation, check-ins, the scheduler, sessions)
-> the front (the turn runner, the dispatcher, owner services, the gateway, the web page).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from adapters.base import Channel
from bot.admin.services import AdminServices
from bot.app.lifecycle import App, owner_memory_file
from bot.app.lock import DataDirLock
from bot.config.model import Config
from bot.delivery.greeter import Greeter
from bot.gateway.claims import OwnerClaims
from bot.gateway.inbound import Announce, Gateway
from bot.gateway.speak_gate import SpeakGate
from bot.services.local_embeddings import require_installed
from bot.store import Store
from bot.store.opening import open_store
from bot.turn.budget import Budget
from bot.turn.chat import ChatLoop
from bot.turn.confirmations import Confirmations
from bot.turn.mcp_tools import McpTools
from bot.turn.media import MediaReader
from bot.turn.runner import TurnRunner
from bot.turn.sessions import Sessions
from bot.turn.tools import default_registry
from bot.workers.dispatcher import Dispatcher
from bot.workers.leadership import LeaderDuties
from bot.workers.scheduler import ReminderPlans, Scheduler
from bot.workers.shards import shard_keeper
from partners.checkins import Checkins
from partners.consolidate import Consolidator
from partners.forgetting import Forgetting
from partners.lore_books import LoreBudget, LoreLibrary
from partners.recall import Recall
from partners.review import Reviewer
from partners.user_memory import UserMemory

if TYPE_CHECKING:
    from bot.web.auth import WebDoor
    from bot.web.server import WebServer

from bot.app.parts import (
    Data,
    Front,
    MemoryWork,
    Outside,
    Owner,
    Sending,
    open_data,
    outside_services,
    owner_parts,
    sending_parts,
)

logger = logging.getLogger(__name__)


async def build_app(
    config: Config, channels: dict[str, Channel], announce: Announce | None = None
) -> App:
    """Open the data directory (taking its lock) and build every part in order. ``announce``
    shows a notice on the terminal (default: a log line)."""
    require_installed(config.embeddings)  # a missing extra stops start-up before the lock
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    try:
        store = await open_store(config.database)
    except BaseException:
        lock.release()
        raise
    try:
        data = await open_data(config, lock, store)
        outside = outside_services(config, store)
        owner = await owner_parts(config, store, channels)
        sending = sending_parts(data, outside, owner, channels)
        work = memory_work(data, outside, owner, sending)
        front = front_parts(data, outside, owner, sending, work, channels, announce)
    except BaseException:
        # a part that refuses to start leaves nothing open: an open store's database thread
        # would keep the process from exiting after the error was printed
        await store.close()
        lock.release()
        raise
    return assemble(data, outside, sending, work, front, channels)


def memory_work(data: Data, outside: Outside, owner: Owner, sending: Sending) -> MemoryWork:
    """Reviews, the nightly pass, check-ins and reminders, and the sessions whose end asks
    for a review."""
    config, store, settings, llm = data.config, data.store, data.settings, outside.llm
    model, usage_day, zone = config.llm.model, config.usage_day, data.partner_zone
    plans = ReminderPlans()
    reviewer = Reviewer(
        store=store,
        memory=data.memory,
        catalog=data.catalog,
        llm=llm,
        settings=settings.memory,
        default_model=model,
        is_owner=owner.is_owner,
        notify_owner=owner.notices.notify_owner,
        timezone=zone,
        usage_day=usage_day,
        claims=data.worker,
        on_reminders=plans.stored,
    )
    consolidator = Consolidator(
        store=store,
        memory=data.memory,
        catalog=data.catalog,
        llm=llm,
        reviewer=reviewer,
        settings=settings.memory,
        default_model=model,
        timezone=zone,
        usage_day=usage_day,
    )
    budget = Budget(store, config)
    checkins = Checkins(
        store=store,
        catalog=data.catalog,
        memory=data.memory,
        llm=llm,
        default_model=model,
        default_timezone=zone,
        over_budget=budget.over_budget,
        send=sending.proactive.send,
        usage_day=usage_day,
    )
    scheduler = Scheduler(
        reviewer, consolidator, checkins, data.owner_zone, config.memory.nightly, store, plans
    )

    async def review_ended(session_ids: list[str]) -> None:
        if settings.memory().auto_memory:
            for session_id in session_ids:
                await reviewer.request(session_id)

    sessions = Sessions(store, data.catalog, data.memory, settings.memory, review_ended)
    forgetting = Forgetting(store, data.memory, data.catalog)
    user_memory = UserMemory(store, data.memory, forgetting)
    return MemoryWork(
        budget, reviewer, consolidator, checkins, scheduler, sessions, forgetting, user_memory
    )


def front_parts(
    data: Data,
    outside: Outside,
    owner: Owner,
    sending: Sending,
    work: MemoryWork,
    channels: dict[str, Channel],
    announce: Announce | None,
) -> Front:
    """The turn runner, the dispatcher, the owner's services, the gateway and the web page."""
    config, store = data.config, data.store
    lore = LoreLibrary(LoreBudget.configured(config))
    confirmations = Confirmations(channels, store, config.mcp.confirm_seconds)
    runner = TurnRunner(
        config,
        store,
        data.memory,
        data.catalog,
        work.sessions,
        ChatLoop(outside.llm, store, config.llm.max_tool_rounds),
        default_registry(),
        sending.delivery,
        channels,
        owner_memory_file(config),
        owner.is_owner,
        work.reviewer,
        budget=work.budget,
        memory_settings=data.settings.memory,
        media=MediaReader(config, store, outside.speech, outside.llm, channels),
        voice=sending.voice,
        lore=lore,
        recall=Recall.configured(store, outside.embeddings, config.embeddings),
        mcp=McpTools(outside.mcp, store, confirmations),
    )
    workers = config.dispatch.max_concurrent_turns
    dispatcher = Dispatcher(store, runner.process, workers, data.worker)
    door = web_door(config, store)
    admin = AdminServices(
        memory=data.memory,
        owner_file=owner_memory_file(config),
        reviewer=work.reviewer,
        consult=runner.consult,
        sessions=work.sessions,
        dispatcher=dispatcher,
        channels=channels,
        next_runs=work.scheduler.next_runs,
        settings=data.settings,
        budget=work.budget,
        lore=lore,
        web=door,
        mcp=outside.mcp,
    )
    gateway = Gateway(
        config,
        store,
        data.catalog,
        owner.access,
        dispatcher,
        channels,
        work.sessions,
        work.user_memory,
        OwnerClaims(store, owner.is_owner),
        announce or log_announcement,
        stop_turn=runner.stop,
        notices=owner.notices,
        greeter=Greeter(store, work.sessions, sending.delivery),
        admin=admin,
        confirmations=confirmations,
        gate=SpeakGate(config, store, outside.llm),
    )
    web = web_server(data, owner, work, admin, door)
    return Front(runner, dispatcher, gateway, web)


def assemble(
    data: Data,
    outside: Outside,
    sending: Sending,
    work: MemoryWork,
    front: Front,
    channels: dict[str, Channel],
) -> App:
    config, store = data.config, data.store
    duties = LeaderDuties(
        work.scheduler,
        sending.delivery,
        channels,
        lambda: work.reviewer.settings().auto_memory,
        outside.embedder,
        config.leader.give_up_seconds,
    )
    return App(
        config,
        store,
        data.memory,
        data.catalog,
        outside.llm,
        outside.speech,
        front.dispatcher,
        sending.delivery,
        front.gateway,
        front.runner,
        work.sessions,
        work.reviewer,
        work.consolidator,
        work.checkins,
        work.forgetting,
        work.scheduler,
        data.worker,
        duties,
        data.lock,
        channels,
        embedder=outside.embedder,
        mcp=outside.mcp,
        web=front.web,
        shards=shard_keeper(store, channels, data.worker.id, config.workers),
    )


def log_announcement(lines: list[str]) -> None:
    logger.warning("%s", " ".join(line.strip() for line in lines))


def web_door(config: Config, store: Store) -> WebDoor | None:
    """The web page's login links, when ``[web] enabled``."""
    if not config.web.enabled:
        return None
    # imported here: the templates' engine stays out of a gateway whose page is off
    from bot.web.auth import WebAuth, WebDoor

    return WebDoor(WebAuth(store, config.web), config.web)


def web_server(
    data: Data, owner: Owner, work: MemoryWork, admin: AdminServices, door: WebDoor | None
) -> WebServer | None:
    """The owner's web page, when ``[web] enabled``."""
    if door is None:
        return None
    from bot.web.actions import OwnerActions, OwnerReach
    from bot.web.pages import WebParts
    from bot.web.server import WebServer

    config, store, catalog = data.config, data.store, data.catalog
    reach = OwnerReach(admin, work.sessions, owner.notices, work.user_memory)
    actions = OwnerActions(config, store, catalog, owner.access, reach)
    return WebServer(config, WebParts(config, store, catalog, actions), door)
