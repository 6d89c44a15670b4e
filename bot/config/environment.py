"""Settings from the environment: every config key as ``COMPANION_<SECTION>__<KEY>``.

So N identical workers need one ``.env`` and no file (docs/architecture.md "Several workers"). Two
underscores separate the levels (``COMPANION_STORAGE__DATABASE_URL`` is ``[storage]
database_url``; a deeper table adds a level), and the name is read in lower case. A key that
holds text (a model, a token, a URL, a path, a choice such as ``mode``) takes the variable's
value as it is; any other key reads it as a TOML value (``8``, ``2.5``, ``true``,
``[1, 2]``, ``[{platform = "telegram", chat_id = 1, partner = "luna"}]``), and as text if it
is not one (``auto``, ``0-3``), which validation then accepts or names. An empty variable
counts as unset. A variable wins over the file's key of the same name.

Every ``COMPANION_`` variable but ``COMPANION_CONFIG`` names a key: a misspelt one is refused
like a misspelt key in the file, rather than left unnoticed with its setting at the default.
A key inside a list of tables (``[[bindings]]``) cannot be set alone; the variable of the list
(``COMPANION_BINDINGS``) holds the whole list.
"""

from __future__ import annotations

import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr

from bot.config.section import ConfigError

ENV_PREFIX = "COMPANION_"
LEVEL_SEPARATOR = "__"
NAMING = "COMPANION_<SECTION>__<KEY>"
TEXT_TYPES = (str, SecretStr)


@dataclass(frozen=True)
class EnvironmentSetting:
    """One key set by one variable."""

    variable: str
    path: tuple[str, ...]
    value: Any

    @property
    def key(self) -> str:
        return ".".join(self.path)


def environment_settings(
    environ: Mapping[str, str], model: type[BaseModel], reserved: tuple[str, ...]
) -> list[EnvironmentSetting]:
    """The settings ``environ`` holds for ``model``, shallow keys first (so a variable for a
    whole table is overlaid before one for a key inside it)."""
    settings = []
    for variable, text in environ.items():
        if not variable.startswith(ENV_PREFIX) or variable in reserved or text == "":
            continue
        path = setting_path(variable)
        value = text if holds_text(model, path) else toml_value(text)
        settings.append(EnvironmentSetting(variable, path, value))
    return sorted(settings, key=lambda setting: (len(setting.path), setting.variable))


def environment_variable(key: str) -> str:
    """The variable that sets ``key`` (``llm.model``: ``COMPANION_LLM__MODEL``)."""
    return ENV_PREFIX + LEVEL_SEPARATOR.join(key.split(".")).upper()


def setting_path(variable: str) -> tuple[str, ...]:
    parts = tuple(part.lower() for part in variable[len(ENV_PREFIX) :].split(LEVEL_SEPARATOR))
    if not all(parts):
        raise ConfigError(
            f"environment variable {variable}: not a setting name; name a key as {NAMING} "
            "(e.g. COMPANION_LLM__MODEL), or unset it"
        )
    return parts


def holds_text(model: type[BaseModel], path: tuple[str, ...]) -> bool:
    """Whether the key at ``path`` takes only text; False for a key the model lacks
    (validation names it)."""
    annotation: Any = model
    for part in path:
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return False
        field = annotation.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
    return is_text(annotation)


def is_text(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        return all(is_text(member) for member in members)
    if origin is Literal:
        return all(isinstance(arg, str) for arg in get_args(annotation))
    return isinstance(annotation, type) and issubclass(annotation, (*TEXT_TYPES, PurePath))


def toml_value(text: str) -> Any:
    """``text`` as one TOML value, or the text itself if it is not one."""
    try:
        parsed = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError:
        return text
    return parsed["value"] if parsed.keys() == {"value"} else text


def overlay(raw: dict[str, Any], settings: list[EnvironmentSetting]) -> dict[str, str]:
    """Set each setting into ``raw`` (the file's tables, changed in place); the keys set,
    each with its variable."""
    applied: dict[str, str] = {}
    for setting in settings:
        table = raw
        for depth, part in enumerate(setting.path[:-1], 1):
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise ConfigError(inside_a_value(setting, setting.path[:depth]))
        table[setting.path[-1]] = setting.value
        applied[setting.key] = setting.variable
    return applied


def inside_a_value(setting: EnvironmentSetting, holder: tuple[str, ...]) -> str:
    whole = environment_variable(".".join(holder))
    return (
        f"environment variable {setting.variable}: {'.'.join(holder)} is not a table, so "
        f"{setting.key} cannot be set alone; set {whole} to its whole value instead "
        f"(for a list of tables, a TOML array such as [{{key = 1}}, {{key = 2}}])"
    )
