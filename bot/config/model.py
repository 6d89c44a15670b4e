"""Typed settings from config.toml and the environment; the only reader of either.

A config file is optional: with none (or with ``COMPANION_CONFIG`` set but empty), every key
has a default, any key may come from a ``COMPANION_<SECTION>__<KEY>`` variable
(``bot/config/environment.py``) and the LLM key from ``OPENAI_API_KEY``. Values written as
``"${NAME}"`` (or with other text around them) read the environment when the file is loaded; a
``COMPANION_`` variable wins over the file's key. Any problem — a wrong type, an unknown key, a
missing variable — becomes one :class:`ConfigError` whose message names the key path (and the
variable, for the environment's) and the fix.

The chat platforms' sections live in ``bot/config/platforms.py``; every section shares the base
in ``bot/config/section.py``.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from bot.config.environment import NAMING, environment_settings, overlay
from bot.config.machine_zone import machine_timezone
from bot.config.platforms import DiscordConfig, TelegramConfig
from bot.config.section import ConfigError, Section  # ConfigError: imported from here too

logger = logging.getLogger(__name__)

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_CONFIG_PATH = Path("config.toml")
CONFIG_PATH_ENV = "COMPANION_CONFIG"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
NO_CONFIG_FILE = Path("(no config file)")
"""What messages name as the file when ``COMPANION_CONFIG`` is empty."""


class LLMConfig(Section):
    base_url: str = "https://api.openai.com/v1"
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    timeout: float = Field(60.0, gt=0)
    max_tool_rounds: int = Field(6, ge=1, le=50)
    max_retries: int = Field(3, ge=0, le=10)
    vision: bool = False
    # photos: a model that describes them for partners whose model cannot see (None: no one
    # describes them), and how far they are downscaled before any model sees them
    vision_model: str | None = None
    image_max_side: int = Field(1024, ge=64, le=8192)
    image_max_bytes: int = Field(1_000_000, ge=10_000)
    # prices for /admin usage; 0 means "unknown" (no cost shown)
    price_prompt_per_million: float = Field(0.0, ge=0)
    price_completion_per_million: float = Field(0.0, ge=0)
    price_per_image: float = Field(0.0, ge=0)
    budget_tokens_per_image: int = Field(1000, ge=0)


DATABASE_URL_SCHEMES = ("postgresql://", "postgres://")


class StorageConfig(Section):
    data_dir: Path = Path("data")
    database_url: SecretStr | None = None
    """A PostgreSQL database (``postgresql://user:password@host/name``) instead of SQLite's
    ``data_dir/gateway.db``: what several workers share. A secret: it holds the password."""
    documents: Literal["auto", "files", "database"] = "auto"
    """Where memory documents are kept: files under data_dir, or rows in the database that
    several workers share; "auto" is files on SQLite and rows on PostgreSQL."""

    @field_validator("database_url")
    @classmethod
    def _postgresql_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        if not value.get_secret_value().startswith(DATABASE_URL_SCHEMES):
            # the value itself is not repeated: it may hold a password
            raise ValueError(
                "must be a PostgreSQL URL such as postgresql://user:password@host:5432/companion"
                " (or leave it out to use SQLite in data_dir)"
            )
        return value


class OwnerConfig(Section):
    telegram_ids: list[int] = Field(default_factory=list)
    discord_ids: list[int] = Field(default_factory=list)
    timezone: str | None = None
    consult_budget: int = Field(5, ge=1, le=12)
    name: str | None = None
    """What partners call the owner in the console (``{{user}}``); unset: the login name."""

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            check_timezone(value)
        return value


def positive_or_default(value: object, info: ValidationInfo) -> object:
    """Review thresholds and the budget: 0, negative or non-numbers would make every turn (or
    none) trigger a review, so they fall back to the default with a warning (seed 003)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    assert info.field_name is not None
    default = MemoryConfig.model_fields[info.field_name].default
    logger.warning(
        "memory.%s = %r is not a positive number; using %s", info.field_name, value, default
    )
    return default


class MemoryConfig(Section):
    auto_memory: bool = True
    review_turns: int = 3
    review_chars: int = 2000
    review_model: str | None = None
    context_budget: int = 20000
    budget_notice: bool = True
    history_chars: int = Field(12000, ge=500)
    session_idle_hours: float = Field(6, gt=0)
    session_max_hours: float = Field(24, gt=0)
    carry_turns: int = Field(6, ge=0, le=50)
    idle_review_minutes: int = Field(30, ge=1)
    nightly: str = Field("04:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    changelog_keep: int = Field(500, ge=10)

    _positive = field_validator("review_turns", "review_chars", "context_budget", mode="before")(
        positive_or_default
    )


class AccessConfig(Section):
    dm_policy: Literal["pairing", "allowlist", "open"] = "pairing"
    allow: list[str] = Field(default_factory=list)
    mention_gating: bool = True
    group_context_messages: int = Field(20, ge=0, le=200)
    # messages one user may send per hour before the partner rests; 0 = no limit
    user_messages_per_hour: int = Field(0, ge=0)


class BindingConfig(Section):
    platform: Literal["telegram", "discord"]
    chat_id: str
    partner: str
    guild_id: str | None = None

    @field_validator("chat_id", "guild_id", mode="before")
    @classmethod
    def _id_as_text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) else value


class DispatchConfig(Section):
    max_concurrent_turns: int = Field(64, ge=1, le=1024)


class WorkersConfig(Section):
    """This process as one of several workers on one database (docs/architecture.md "Several
    workers"); with SQLite there is one worker and these only pace its bookkeeping."""

    id: str | None = Field(None, min_length=1, max_length=100)
    """How this worker is named in the registry and ``/admin status``; default host-pid."""
    lease_seconds: float = Field(10, ge=2, le=3600)
    """How long a worker's claim on a chat (and the leadership) lasts unless renewed: a
    worker paused or cut off mid-turn is replaced after at most this long (one that died, on
    PostgreSQL, at another's next heartbeat)."""
    heartbeat_seconds: float = Field(2, gt=0, le=600)
    """How often a worker renews its leases and the leadership and looks for unclaimed work."""

    @field_validator("heartbeat_seconds")
    @classmethod
    def _well_within_the_lease(cls, value: float, info: ValidationInfo) -> float:
        lease = info.data.get("lease_seconds")
        if lease is not None and value > lease / 3:
            raise ValueError(
                f"must be at most a third of workers.lease_seconds ({lease}), so a lease is "
                "renewed before it lapses even if one heartbeat is late"
            )
        return value


class LeaderConfig(Section):
    """The leading worker (docs/architecture.md "Several workers"): when it lets another one try."""

    give_up_seconds: float = Field(60, gt=0, le=24 * 3600)
    """How long the leader's duties (Telegram's long poll) may fail without one success
    before the leader gives the leadership up so that another live worker takes it over; a
    lone worker keeps it."""


class DeliveryConfig(Section):
    """How long and how often a reply the platform refuses for now is tried again."""

    retry_minutes: float = Field(30, gt=0, le=7 * 24 * 60)
    first_pause_seconds: float = Field(2, gt=0)
    max_pause_seconds: float = Field(300, gt=0)

    @field_validator("max_pause_seconds")
    @classmethod
    def _not_below_the_first(cls, value: float, info: ValidationInfo) -> float:
        first = info.data.get("first_pause_seconds")
        if first is not None and value < first:
            raise ValueError(f"must be at least first_pause_seconds ({first:g})")
        return value


class SpeechConfig(Section):
    """Voice in and out through an OpenAI-compatible speech endpoint (docs/media.md)."""

    base_url: str | None = None
    """Defaults to llm.base_url."""
    api_key: SecretStr | None = None
    """Defaults to llm.api_key."""
    stt_model: str | None = None
    """Transcribes voice notes (e.g. whisper-1); unset: voice notes get a polite text answer."""
    tts_model: str | None = None
    """Speaks replies (e.g. tts-1); unset: replies are text only."""
    voice: str = "alloy"
    """The voice when a partner's preset.yml names none."""
    keep_audio: bool = False
    max_seconds: int = Field(300, ge=1, le=3 * 3600)
    timeout: float = Field(120.0, gt=0)
    price_per_minute: float = Field(0.0, ge=0)
    price_per_million_chars: float = Field(0.0, ge=0)
    budget_tokens_per_minute: int = Field(1000, ge=0)
    budget_tokens_per_thousand_chars: int = Field(1000, ge=0)


class EmbeddingsConfig(Section):
    """Optional semantic recall through an OpenAI-compatible embeddings endpoint (docs/search.md).
    Unset ``base_url`` or ``model``: off, search is lexical only."""

    base_url: str | None = None
    api_key: SecretStr | None = None
    """Unset: llm.api_key when the endpoint is llm.base_url, else none (a local server)."""
    model: str | None = Field(None, validate_default=True)
    batch_size: int = Field(64, ge=1, le=2048)
    """Texts per request when messages are embedded in the background."""
    timeout: float = Field(60.0, gt=0)
    """Seconds one background batch may take."""
    max_retries: int = Field(2, ge=0, le=10)
    """Retries of a background batch before the embedder backs off (a query has none)."""
    query_timeout: float = Field(2.0, gt=0, le=30)
    """Seconds a search waits for its query's vector before it answers lexically."""
    max_scan: int = Field(20_000, ge=100, le=5_000_000)
    """Vectors one search compares at most: the newest ones the asker may see."""
    cache_mb: int = Field(512, ge=0, le=1_000_000)
    """Memory for vectors kept between searches (0: read them from the database each time)."""

    @property
    def enabled(self) -> bool:
        return bool(self.base_url and self.model)

    @field_validator("model")
    @classmethod
    def _both_or_neither(cls, value: str | None, info: ValidationInfo) -> str | None:
        if bool(value) != bool(info.data.get("base_url")):
            missing = "model" if not value else "base_url"
            raise ValueError(
                f"embeddings.{missing} is not set: set both base_url and model to turn "
                "semantic recall on, or neither to leave it off"
            )
        return value


class PartnersConfig(Section):
    default: str | None = None


class WebConfig(Section):
    """The owner's web page (docs/web.md): off unless enabled, loopback by default,
    entered only through a one-time link from ``/admin web``."""

    enabled: bool = False
    listen: str = "127.0.0.1"
    port: int = Field(8780, ge=0, le=65535)
    """0 picks a free port (tests)."""
    public_url: str | None = None
    """The address the owner's browser uses, when a reverse proxy stands in front
    (``https://...`` also marks the session cookie Secure)."""
    session_hours: float = Field(12, gt=0, le=24 * 30)

    @field_validator("public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (the address you open)")
        return value.rstrip("/") if value else value


class Config(Section):
    llm: LLMConfig = LLMConfig()
    storage: StorageConfig = StorageConfig()
    owner: OwnerConfig = OwnerConfig()
    memory: MemoryConfig = MemoryConfig()
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    access: AccessConfig = AccessConfig()
    bindings: list[BindingConfig] = Field(default_factory=list)
    dispatch: DispatchConfig = DispatchConfig()
    workers: WorkersConfig = WorkersConfig()
    leader: LeaderConfig = LeaderConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    partners: PartnersConfig = PartnersConfig()
    speech: SpeechConfig = SpeechConfig()
    embeddings: EmbeddingsConfig = EmbeddingsConfig()
    web: WebConfig = WebConfig()

    _environment: dict[str, str] = PrivateAttr(default_factory=dict)

    @property
    def from_environment(self) -> dict[str, str]:
        """The keys set by the environment (``llm.model``), each with its variable."""
        return dict(self._environment)

    @property
    def data_dir(self) -> Path:
        return self.storage.data_dir

    @property
    def database(self) -> Path | str:
        """What :func:`bot.store.opening.open_store` opens: the PostgreSQL URL when
        ``storage.database_url`` is set, else SQLite's file in the data directory."""
        if self.storage.database_url is not None:
            return self.storage.database_url.get_secret_value()
        return self.storage.data_dir / "gateway.db"

    def owner_timezone(self) -> ZoneInfo:
        """The owner's zone, else the machine's, else UTC."""
        if self.owner.timezone:
            return ZoneInfo(self.owner.timezone)
        return machine_timezone()

    def usage_day(self, when: float) -> str:
        """The day tokens spent at ``when`` are booked on, and the day budgets read: the
        owner's calendar for every kind (chat, consult, review, checkin), so a partner in
        another time zone cannot spend outside its budget. Budgets reset at the owner's
        midnight."""
        return datetime.fromtimestamp(when, self.owner_timezone()).date().isoformat()


def check_timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {name!r}; use an IANA name like 'Europe/Lisbon'"
        ) from exc


def config_path(
    explicit: Path | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The config file: ``--config``, else ``$COMPANION_CONFIG``, else ./config.toml; None
    when ``COMPANION_CONFIG`` is set but empty (a worker the environment alone configures)."""
    env = os.environ if environ is None else environ
    if explicit is not None:
        return explicit
    named = env.get(CONFIG_PATH_ENV, str(DEFAULT_CONFIG_PATH))
    return Path(named) if named else None


def load_config(path: Path | None = None, environ: dict[str, str] | None = None) -> Config:
    """Read and validate the config. A missing default file means "all defaults"; a file
    named by ``--config`` or ``$COMPANION_CONFIG`` must exist."""
    env = dict(os.environ if environ is None else environ)
    file = config_path(path, env)
    if file is None:
        return parse_config("", NO_CONFIG_FILE, env)
    text = read_config_text(file, named=path is not None or CONFIG_PATH_ENV in env)
    return parse_config(text or "", file, env)


def read_config_text(file: Path, named: bool) -> str | None:
    """The file's text; None if it is absent and was not ``named`` explicitly.

    A config mounted into a container is the usual way to get these wrong: a file missing on
    the host (silently ignored, it would run on defaults) or a bind mount that Docker made a
    directory because its source did not exist."""
    if file.is_dir():
        raise ConfigError(
            f"{file} is a directory, not a config file (Docker creates one when a bind-mounted "
            "file does not exist on the host); mount the config.toml file itself"
        )
    if not file.exists():
        if not named:
            return None
        raise ConfigError(
            f"{file}: no such file (named by --config or {CONFIG_PATH_ENV}); create it with "
            "`companion setup`, or copy config.example.toml there"
        )
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{file}: not UTF-8 text; save it as UTF-8") from exc
    except OSError as exc:
        raise ConfigError(
            f"{file}: cannot be read ({exc.strerror}); check its permissions"
        ) from None


def parse_config(text: str, file: Path, environ: dict[str, str] | None = None) -> Config:
    """Validate config text with the environment's settings over it; ``file`` only names it
    in messages."""
    env = dict(os.environ if environ is None else environ)
    try:
        raw: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML ({exc}); fix the syntax there") from exc
    raw = _expand_env(raw, env, file, ())
    from_env = overlay(raw, environment_settings(env, Config, reserved=(CONFIG_PATH_ENV,)))
    llm = raw.setdefault("llm", {}) if isinstance(raw.get("llm", {}), dict) else None
    if llm is not None and "api_key" not in llm and env.get(DEFAULT_API_KEY_ENV):
        llm["api_key"] = env[DEFAULT_API_KEY_ENV]
        from_env["llm.api_key"] = DEFAULT_API_KEY_ENV
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, file, from_env)) from None
    config._environment = from_env
    return config


def _expand_env(value: Any, env: dict[str, str], file: Path, where: tuple[str | int, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _expand_env(v, env, file, (*where, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, env, file, (*where, i)) for i, v in enumerate(value)]
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env or env[name] == "":
                key = ".".join(str(part) for part in where)
                raise ConfigError(
                    f"{file}: {key} refers to the environment variable {name}, which is not set; "
                    f"export {name}=... before starting, or write the value into the file"
                )
            return env[name]

        return ENV_REFERENCE.sub(substitute, value)
    return value


SECRET_KEY_WORDS = ("token", "key", "secret", "database_url", "password")
"""A key whose name holds one of these is never echoed in an error (a database URL carries
its password)."""


def _describe(exc: ValidationError, file: Path, from_env: dict[str, str]) -> str:
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        variable = _variable_of(key, from_env)
        if error["type"] == "extra_forbidden":
            hint = "unknown key; remove it or check its spelling against config.example.toml"
            if variable is not None:
                hint = (
                    f"unknown key; unset the variable, or name a key of config.example.toml "
                    f"as {NAMING} (two underscores between levels: COMPANION_LLM__MODEL)"
                )
        elif any(word in key for word in SECRET_KEY_WORDS):
            hint = f"{error['msg']} (value hidden)"
        else:
            hint = f"{error['msg']} (got {error.get('input')!r})"
        where = str(file) if variable is None else f"environment variable {variable}"
        lines.append(f"{where}: {key}: {hint}")
    return "\n".join(lines)


def _variable_of(key: str, from_env: dict[str, str]) -> str | None:
    """The variable that set ``key`` or a table holding it, if the environment did."""
    parts = key.split(".")
    for depth in range(len(parts), 0, -1):
        variable = from_env.get(".".join(parts[:depth]))
        if variable is not None:
            return variable
    return None
