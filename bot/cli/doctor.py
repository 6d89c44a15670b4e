"""``companion doctor``: what would break a first run, found before the first message.

One line per finding: ``ok`` or ``BAD`` (each failure names its fix), or an indented fact. It
names the keys the environment set, checks the LLM endpoint live (reachable, ``/v1``, the
model, the key), the embeddings endpoint the same way when ``[embeddings]`` is set (or that
the local embedder loads and embeds, and its thread cap), each chat token with its platform
(the partners' own Telegram bots of ``[telegram.bots]`` too, and that each names a partner),
that every enabled platform has an owner (in config.toml or claimed), that a PostgreSQL
database (``storage.database_url``) answers and at which schema (and what a worker reads from
it rather than from its data directory), that the data directory is writable, that every
partner directory loads and that every MCP server starts (``bot/cli/doctor_mcp.py``). It only
reads, so it works beside a running gateway (it opens a database only when it is at the
current schema, so opening it changes nothing); secrets are only ever said to be set or not.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path

from bot.cli.doctor_mcp import mcp_checks
from bot.cli.doctor_tokens import (
    Finding,
    PartnerBotsChecker,
    TokenChecker,
    partner_bot_findings,
    token_findings,
)
from bot.cli.invocation import command
from bot.config.environment import environment_variable
from bot.config.model import Config
from bot.config.services import LLMConfig
from bot.gateway.memory_documents import loaded_catalogs, partner_catalog, rows_configured
from bot.services.embeddings_check import check_embeddings
from bot.services.llm import configuration_problem
from bot.services.llm_check import (
    check_endpoint,
    is_local_endpoint,
    is_served,
    list_models,
    shown_models,
)
from bot.store import SCHEMA, StoreError
from bot.store.opening import open_store
from bot.store.postgres.connection import database_schema, redacted
from partners.catalog import PartnerCatalog, catalog_line


async def examine(
    config: Config,
    config_file: Path | None,
    token_checks: Mapping[str, TokenChecker],
    partner_bots: PartnerBotsChecker | None = None,
) -> list[Finding]:
    """Every check, in the order a first run meets them. ``token_checks`` has one checker
    per platform whose token is set; ``partner_bots`` checks the partners' own Telegram bots."""
    findings = [config_finding(config_file, config), *environment_findings(config)]
    findings += await llm_findings(config)
    findings += await embeddings_findings(config)
    for platform, check in token_checks.items():
        findings += await token_findings(platform, check)
    if partner_bots is not None and config.telegram.bots:
        findings += partner_bot_findings(await partner_bots())
    findings += await database_findings(config)
    findings += worker_findings(config)
    findings += await owner_findings(config, list(token_checks))
    findings.append(data_dir_finding(config.data_dir))
    if rows_configured(config):
        partners, models = await database_partner_findings(config)
    else:
        partners, models = partner_findings(config.data_dir, config.telegram.bots)
    findings += partners
    findings += await partner_model_findings(config.llm, models)
    findings += [Finding(ok, text) for ok, text in await mcp_checks(config.mcp)]
    return findings


def config_finding(config_file: Path | None, config: Config) -> Finding:
    if config_file is None and config.from_environment:
        return Finding(
            None, "config: no config file; the environment (COMPANION_* variables) and defaults"
        )
    if config_file is None:
        return Finding(None, f"config: no config.toml here, so all defaults; `{command('setup')}`")
    return Finding(True, f"config: {config_file}")


def environment_findings(config: Config) -> list[Finding]:
    """The keys the environment set, by name only (their values may be secrets); a key set
    by a variable not named after it (``OPENAI_API_KEY``) names its variable."""
    if not config.from_environment:
        return []
    keys = [
        key if variable == environment_variable(key) else f"{key} ({variable})"
        for key, variable in sorted(config.from_environment.items())
    ]
    return [Finding(None, f"from the environment: {', '.join(keys)}")]


async def llm_findings(config: Config) -> list[Finding]:
    llm = config.llm
    findings = [Finding(None, f"llm.base_url = {llm.base_url}, llm.model = {llm.model}")]
    if llm.api_key is not None:
        findings.append(Finding(True, "llm.api_key: set (hidden)"))
    elif is_local_endpoint(llm.base_url):
        findings.append(Finding(True, "llm.api_key: not set (not needed for this local endpoint)"))
    else:
        findings.append(Finding(None, "llm.api_key: not set (a hosted endpoint will say so)"))
    problem = configuration_problem(llm) or (await check_endpoint(llm)).problem
    answers = f"LLM endpoint {llm.base_url.rstrip('/')} answers with model {llm.model}"
    findings.append(Finding(problem is None, problem or answers))
    return findings


async def embeddings_findings(config: Config) -> list[Finding]:
    """The ``[embeddings]`` endpoint, checked live when it is set (nothing when it is not:
    search is lexical)."""
    embeddings = config.embeddings
    if not embeddings.enabled:
        return []
    if embeddings.provider == "local":
        from bot.services.local_embeddings import check_local

        return [Finding(*await check_local(embeddings))]
    problem = await check_embeddings(embeddings, config.llm)
    url = (embeddings.base_url or "").rstrip("/")
    answers = f"embeddings endpoint {url} embeds with model {embeddings.model}"
    return [Finding(problem is None, problem or answers)]


async def owner_findings(config: Config, platforms: list[str]) -> list[Finding]:
    """An owner for each platform the gateway goes online on: config ids or a claim."""
    configured = {"telegram": config.owner.telegram_ids, "discord": config.owner.discord_ids}
    claimed = await claimed_owners(config)
    findings = []
    for platform in platforms:
        owners = [f"{user_id} (config.toml)" for user_id in configured.get(platform, [])]
        owners += [
            f"{user_key.partition(':')[2]} (claimed {day})"
            for user_key, owner_platform, day in claimed
            if owner_platform == platform
        ]
        if owners:
            findings.append(Finding(True, f"{platform} owner: {', '.join(owners)}"))
        elif await claim_waiting(config, platform):
            findings.append(
                Finding(
                    None,
                    f"{platform}: a claim code is waiting for you: start `{command('run')}` and "
                    "send the bot, in a direct message, the /claim code setup printed (lost it? "
                    "run prints a new one at start)",
                )
            )
        else:
            findings.append(
                Finding(
                    False,
                    f"nobody owns the bot on {platform}: start `{command('run')}` and send the "
                    f"bot the /claim code it prints (or set owner.{platform}_ids in config.toml)",
                )
            )
    return findings


async def claim_waiting(config: Config, platform: str) -> bool:
    """Whether a claim code for ``platform`` is still unused and unexpired (setup printed
    it; the owner has not sent it yet)."""
    if not await database_ready(config):
        return False
    store = await open_store(config.database)
    try:
        return bool(await store.live_claim_codes(platform))
    finally:
        await store.close()


async def database_findings(config: Config) -> list[Finding]:
    """A PostgreSQL database answers, and at which schema (SQLite's file needs no check: the
    data directory's is enough)."""
    if config.storage.database_url is None:
        return []
    url = config.storage.database_url.get_secret_value()
    try:
        version, server = await database_schema(url)
    except StoreError as exc:
        return [Finding(False, str(exc))]
    where = f"database {redacted(url)} answers (PostgreSQL {server})"
    if version > len(SCHEMA):
        return [Finding(False, f"{where}, but a newer version wrote it: upgrade the gateway")]
    if version < len(SCHEMA):
        note = f"new: `{command('run')}` creates the tables" if version == 0 else "older"
        return [
            Finding(True, where),
            Finding(None, f"database schema {version} of {len(SCHEMA)} ({note})"),
        ]
    return [Finding(True, f"{where}, schema {version} (current)")]


async def claimed_owners(config: Config) -> list[tuple[str, str, str]]:
    """(user key, platform, day claimed); none before the database exists at the current
    schema (doctor neither creates nor migrates it)."""
    if not await database_ready(config):
        return []
    store = await open_store(config.database)
    try:
        rows = await store.claimed_owners()
    finally:
        await store.close()
    return [
        (
            row["user_key"],
            row["platform"],
            datetime.fromtimestamp(row["claimed_at"], UTC).date().isoformat(),
        )
        for row in rows
    ]


async def database_ready(config: Config) -> bool:
    """Whether the database exists at the current schema (else doctor leaves it alone: it
    neither creates nor migrates one)."""
    if config.storage.database_url is None:
        return await asyncio.to_thread(Path(config.database).exists)
    try:
        return (await database_schema(str(config.database)))[0] == len(SCHEMA)
    except StoreError:
        return False  # database_findings says why


def worker_findings(config: Config) -> list[Finding]:
    """On PostgreSQL, where several workers share one database: what this worker reads from
    it and what it still reads from its own data directory."""
    if config.storage.database_url is None:
        return []
    shared = "this worker reads messages, sessions, users, bindings and settings"
    if rows_configured(config):
        shared += (
            ", and memory, journals, the changelog and the partners (preset.yml, persona, "
            "card, lorebook, avatar) from the database"
        )
        kept = []
        rest = (
            "this worker needs its data directory only for its lock and status file "
            "(companion health) and what it writes for the owner (exports, card imports, kept "
            "voice notes); partner directories found there are read into the database once"
        )
    else:
        shared += " from the database"
        kept = [
            Finding(
                None,
                "memory, journals and the changelog are files in the data directory "
                '(storage.documents = "files"): other workers do not see them',
            ),
            Finding(
                None,
                f"partners are read from the data directory ({config.data_dir / 'partners'}): "
                "every worker needs the same partners/ directory (which partners exist, "
                "preset.yml, avatars, lorebooks)",
            ),
        ]
        rest = (
            "apart from partners/, this worker needs its data directory only for its lock and "
            "status file (companion health) and what it writes for the owner (exports, card "
            "imports, kept voice notes)"
        )
    return [Finding(None, shared), *kept, Finding(None, rest)]


def data_dir_finding(data_dir: Path) -> Finding:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        return Finding(
            False,
            f"data dir {data_dir} is not writable ({exc.strerror}): fix its owner or "
            "permissions, or set storage.data_dir",
        )
    return Finding(True, f"data dir {data_dir.resolve()} is writable")


def partner_findings(
    data_dir: Path, bots: Collection[str] = ()
) -> tuple[list[Finding], dict[str, str]]:
    """The partners in the data directory (``bots``: the partner ids ``[telegram.bots]``
    names, each of which must be one of them)."""
    catalog = PartnerCatalog(data_dir / "partners")
    catalog.reload()
    none = "none yet (the example is made at start)"
    return _catalog_findings(catalog, none, bots), own_models(catalog)


def own_models(catalog: PartnerCatalog) -> dict[str, str]:
    """The partners that choose their own model (preset.yml ``model``), with it."""
    return {p.id: p.preset.model for p in catalog.all() if p.preset.model}


async def partner_model_findings(llm: LLMConfig, models: dict[str, str]) -> list[Finding]:
    """Each partner's own model against the endpoint's list, asked once (``llm.model`` was
    checked above; an endpoint that did not answer was named there)."""
    if not models or configuration_problem(llm) is not None:
        return []
    listed = await list_models(llm)
    if listed.problem is not None:
        return []
    url = llm.base_url.rstrip("/")
    findings = []
    for partner_id, model in sorted(models.items()):
        if listed.models is None:
            findings.append(
                Finding(
                    None,
                    f'partner {partner_id}: model "{model}" not checked ({url} lists no models)',
                )
            )
        elif is_served(model, listed.models):
            findings.append(Finding(True, f'partner {partner_id}: model "{model}" is served'))
        else:
            findings.append(
                Finding(
                    False,
                    f'partner {partner_id}: model "{model}" is not served by {url}; served: '
                    f"{shown_models(listed.models)}. Set one with /admin partner set "
                    f"{partner_id} model NAME",
                )
            )
    return findings


def _catalog_findings(
    catalog: PartnerCatalog, none: str, bots: Collection[str] = ()
) -> list[Finding]:
    names = ", ".join(p.id for p in catalog.all()) or none
    findings = [Finding(True, f"partners: {names}")]
    findings += [
        Finding(False, f"partner {partner_id} does not load: {error}")
        for partner_id, error in catalog.errors.items()
    ]
    known = {p.id for p in catalog.all()} | set(catalog.errors)
    if not known:
        return findings  # none yet: the first start makes the example, which may be named
    findings += [
        Finding(
            False,
            f"telegram.bots.{partner_id}: there is no partner {partner_id} (start-up stops "
            "here); write a partner's id, as /admin partners lists them, or remove the line",
        )
        for partner_id in sorted(set(bots) - known)
    ]
    return findings


async def database_partner_findings(config: Config) -> tuple[list[Finding], dict[str, str]]:
    """Partners kept in the database: which there are, at which catalog version, and the
    version each running worker says it has loaded (one behind the others shows). Nothing
    before the database is at the current schema (doctor neither creates nor migrates it)."""
    none = f"none yet (`{command('run')}` makes the example)"
    if not await database_ready(config):
        return [Finding(None, f"partners: {none}")], {}
    store = await open_store(config.database)
    try:
        catalog = partner_catalog(config, store)
        await catalog.refresh()
        loaded = await loaded_catalogs(store)
        running = [worker.worker_id for worker in await store.workers()]
    finally:
        await store.close()
    findings = _catalog_findings(catalog, none, config.telegram.bots)
    findings[0] = Finding(True, f"{findings[0].text} — {catalog.describe()} in the database")
    findings += [
        Finding(None, f"worker {worker} has loaded partners: {catalog_line(*loaded[worker])}")
        for worker in running
        if worker in loaded
    ]
    return findings, own_models(catalog)
