"""Typed settings from config.toml and the environment; the only reader of either.

A config file is optional: with none (or with ``COMPANION_CONFIG`` set but empty), every key
has a default, any key may come from a ``COMPANION_<SECTION>__<KEY>`` variable
(``bot/config/environment.py``) and the LLM key from ``OPENAI_API_KEY``. Values written as
``"${NAME}"`` (or with other text around them) read the environment when the file is loaded; a
``COMPANION_`` variable wins over the file's key. Any problem — a wrong type, an unknown key, a
missing variable — becomes one :class:`ConfigError` whose message names the key path (and the
variable, for the environment's) and the fix.

The sections live beside it, by what they set: the chat platforms in ``bot/config/platforms.py``,
the outside services (model, speech, embeddings) in ``bot/config/services.py``, who talks to which
partner in ``bot/config/access.py``, memory in ``bot/config/memory.py``, and where and how the
gateway runs (storage, workers, delivery, the web page) in ``bot/config/deployment.py``; every
section shares the base in ``bot/config/section.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import Field, PrivateAttr, ValidationError

from bot.config.access import AccessConfig, BindingConfig, OwnerConfig, PartnersConfig
from bot.config.deployment import (
    DeliveryConfig,
    DispatchConfig,
    LeaderConfig,
    StorageConfig,
    WebConfig,
    WorkersConfig,
)
from bot.config.environment import NAMING, environment_settings, overlay
from bot.config.machine_zone import machine_timezone
from bot.config.mcp import McpConfig
from bot.config.memory import MemoryConfig
from bot.config.platforms import DiscordConfig, TelegramConfig
from bot.config.scene import SceneConfig
from bot.config.section import ConfigError, Section  # ConfigError: imported from here too
from bot.config.services import EmbeddingsConfig, LLMConfig, SpeechConfig

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_CONFIG_PATH = Path("config.toml")
CONFIG_PATH_ENV = "COMPANION_CONFIG"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
NO_CONFIG_FILE = Path("(no config file)")
"""What messages name as the file when ``COMPANION_CONFIG`` is empty."""


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
    scene: SceneConfig = SceneConfig()
    mcp: McpConfig = McpConfig()

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


def load_config(
    path: Path | None = None,
    environ: dict[str, str] | None = None,
    unneeded: Collection[str] = (),
) -> Config:
    """Read and validate the config. A missing default file means "all defaults"; a file
    named by ``--config`` or ``$COMPANION_CONFIG`` must exist. ``unneeded``: keys (and the
    tables below them) a command does not use, left unset when they refer to an environment
    variable this shell does not set (``companion pairing list`` needs no bot token)."""
    env = dict(os.environ if environ is None else environ)
    file = config_path(path, env)
    if file is None:
        return parse_config("", NO_CONFIG_FILE, env)
    text = read_config_text(file, named=path is not None or CONFIG_PATH_ENV in env)
    return parse_config(text or "", file, env, unneeded)


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


def parse_config(
    text: str, file: Path, environ: dict[str, str] | None = None, unneeded: Collection[str] = ()
) -> Config:
    """Validate config text with the environment's settings over it; ``file`` only names it
    in messages. ``unneeded``: as :func:`load_config`'s."""
    env = dict(os.environ if environ is None else environ)
    try:
        raw: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML ({exc}); fix the syntax there") from exc
    raw = _expand_env(raw, _Expansion(env, file, tuple(unneeded)), ())
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


class _UnneededUnset(Exception):
    """A key the command does not use refers to a variable that is not set: left out."""


@dataclass(frozen=True)
class _Expansion:
    env: dict[str, str]
    file: Path
    unneeded: tuple[str, ...]

    def unneeded_key(self, key: str) -> bool:
        return any(key == prefix or key.startswith(prefix + ".") for prefix in self.unneeded)


def _expand_env(value: Any, expansion: _Expansion, where: tuple[str | int, ...]) -> Any:
    if isinstance(value, dict):
        expanded = {}
        for k, v in value.items():
            with contextlib.suppress(_UnneededUnset):
                expanded[k] = _expand_env(v, expansion, (*where, k))
        return expanded
    if isinstance(value, list):
        return [_expand_env(v, expansion, (*where, i)) for i, v in enumerate(value)]
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            env = expansion.env
            if name not in env or env[name] == "":
                key = ".".join(str(part) for part in where)
                if expansion.unneeded_key(key):
                    raise _UnneededUnset(key)
                raise ConfigError(
                    f"{expansion.file}: {key} refers to the environment variable {name}, which "
                    f"is not set; export {name}=... before starting, or write the value into "
                    "the file"
                )
            return env[name]

        return ENV_REFERENCE.sub(substitute, value)
    return value


SECRET_KEY_WORDS = ("token", "key", "secret", "database_url", "password", "telegram.bots")
"""A key whose name holds one of these is never echoed in an error (a database URL carries
its password; ``[telegram.bots]`` holds tokens under partner ids)."""


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
