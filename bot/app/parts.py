"""The parts of the gateway in small frozen groups, and the builders of the first ones: the
opened data directory, the outside services, the owner (whose notices every later part is
handed) and sending. ``bot/app/build.py`` builds the rest in order."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from adapters.base import Channel
from bot.app.lifecycle import owner_memory_file
from bot.app.lock import DataDirLock
from bot.config.memory_settings import Settings
from bot.config.model import Config, ConfigError
from bot.delivery.notices import Notices
from bot.delivery.proactive import ProactiveSender, stop_checkins
from bot.delivery.sender import Delivery
from bot.gateway.access import Access, OwnerCheck, owner_keys
from bot.gateway.inbound import Gateway
from bot.gateway.memory_documents import (
    adopt_local_files,
    adopt_local_partners,
    memory_store,
    partner_catalog,
)
from bot.services.embeddings import EmbeddingsClient
from bot.services.llm import LLMClient
from bot.services.local_embeddings import embeddings_client
from bot.services.mcp_servers import McpServers
from bot.services.speech import SpeechClient
from bot.store import Store
from bot.store.sqlite import SqliteStore
from bot.turn.budget import Budget
from bot.turn.runner import TurnRunner
from bot.turn.sessions import Sessions
from bot.turn.voice_replies import VoiceReplies
from bot.workers.dispatcher import Dispatcher
from bot.workers.embedder import Embedder
from bot.workers.scheduler import Scheduler
from bot.workers.worker import Worker
from partners.catalog import PartnerCatalog, apply_search_languages
from partners.checkins import Checkins
from partners.consolidate import Consolidator
from partners.forgetting import Forgetting
from partners.memory import MemoryStore
from partners.persona import Partner
from partners.review import Reviewer
from partners.user_memory import UserMemory

if TYPE_CHECKING:
    from bot.web.server import WebServer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Data:
    """The data directory opened: its lock, the store, and what is read from it at start."""

    config: Config
    lock: DataDirLock
    store: Store
    worker: Worker
    catalog: PartnerCatalog
    memory: MemoryStore
    settings: Settings
    owner_zone: ZoneInfo

    def partner_zone(self, partner: Partner | None) -> ZoneInfo:
        """A partner's calendar (journals, check-ins): its own zone, else the owner's."""
        return partner.timezone(self.owner_zone) if partner else self.owner_zone


@dataclass(frozen=True)
class Outside:
    llm: LLMClient
    speech: SpeechClient
    embeddings: EmbeddingsClient | None
    embedder: Embedder | None
    mcp: McpServers
    """The ``[mcp]`` servers; none runs until a turn first needs it."""


@dataclass(frozen=True)
class Owner:
    is_owner: OwnerCheck
    access: Access
    notices: Notices


@dataclass(frozen=True)
class Sending:
    voice: VoiceReplies
    delivery: Delivery
    proactive: ProactiveSender


@dataclass(frozen=True)
class MemoryWork:
    budget: Budget
    reviewer: Reviewer
    consolidator: Consolidator
    checkins: Checkins
    scheduler: Scheduler
    sessions: Sessions
    forgetting: Forgetting
    user_memory: UserMemory


@dataclass(frozen=True)
class Front:
    runner: TurnRunner
    dispatcher: Dispatcher
    gateway: Gateway
    web: WebServer | None


async def open_data(config: Config, lock: DataDirLock, store: Store) -> Data:
    """The store brought in line with config.toml and the files beside it: bindings, the
    partners (the example one made if there is none), memory files and memory settings."""
    await store.replace_config_bindings((b.platform, b.chat_id, b.partner) for b in config.bindings)
    worker = Worker(store, config.workers)
    catalog = partner_catalog(config, store, worker.id)
    await adopt_local_partners(catalog)
    created = await catalog.ensure_first()
    if created:
        logger.info("created the example partner %r; partners: %s", created.id, catalog.describe())
    await apply_search_languages(store, catalog)
    memory = memory_store(config, store)
    roots = [owner_memory_file(config).root, *(p.dir for p in catalog.all())]
    await adopt_local_files(memory, roots)
    await catalog.refresh()  # post-history instructions those files brought in
    check_partner_bots(config, catalog)
    settings = Settings(config.memory, store)
    await settings.load()
    return Data(config, lock, store, worker, catalog, memory, settings, config.owner_timezone())


def check_partner_bots(config: Config, catalog: PartnerCatalog) -> None:
    """Every ``[telegram.bots]`` entry names a partner (one that does not load counts: its
    files are there to fix)."""
    known = {p.id for p in catalog.all()} | set(catalog.errors)
    unknown = sorted(set(config.telegram.bots) - known)
    if unknown:
        raise ConfigError(
            f"telegram.bots names {', '.join(unknown)}, but there is no such partner (the "
            f"partners: {', '.join(sorted(known)) or 'none'}); write the partner's id, as "
            "/admin partners shows it, or remove the line"
        )


def outside_services(config: Config, store: Store) -> Outside:
    embeddings = (
        embeddings_client(config.embeddings, config.llm) if config.embeddings.enabled else None
    )
    embedder = Embedder(store, embeddings, config.embeddings.batch_size) if embeddings else None
    return Outside(
        LLMClient(config.llm),
        SpeechClient(config.speech, config.llm),
        embeddings,
        embedder,
        McpServers(config.mcp),
    )


async def owner_parts(config: Config, store: Store, channels: dict[str, Channel]) -> Owner:
    """Who the owner is (configured ids and claimed ones), access, and the owner's notices."""
    claimed = {row["user_key"] for row in await store.claimed_owners()}
    is_owner = OwnerCheck(owner_keys(config) | claimed)
    return Owner(is_owner, Access(config, store, is_owner), Notices(channels, is_owner))


def sending_parts(
    data: Data, outside: Outside, owner: Owner, channels: dict[str, Channel]
) -> Sending:
    config, store, catalog = data.config, data.store, data.catalog

    def voice_of(partner_id: str | None) -> str | None:
        partner = catalog.get(partner_id) if partner_id else None
        voice = partner.preset.extra.get("voice") if partner else None
        return str(voice) if voice else None

    voice = VoiceReplies(outside.speech, store, voice_of, config.usage_day)
    delivery = Delivery(
        store,
        channels,
        lambda pid: (p.name, p.preset.avatar, p.avatar_image) if (p := catalog.get(pid)) else None,
        config.delivery,
        owner.notices.notify_owner,
        voice,
        ensure_lease=data.worker.ensure,
        retry_lease=data.worker.retry_lease,
        on_unreachable=functools.partial(stop_checkins, store),
        sole_gateway=isinstance(store, SqliteStore),  # one gateway per SQLite file
    )
    return Sending(voice, delivery, ProactiveSender(store, delivery))
