"""The base of every settings section, in ``bot/config/model.py`` and the modules beside it, and
the one error every problem with the settings becomes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ConfigError(Exception):
    """The configuration cannot be used; the message says which key and what to do."""


class Section(BaseModel):
    """One table of config.toml: a key it does not name is refused (a misspelt key would
    otherwise leave its setting at the default unnoticed), and its values never change once
    loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)
