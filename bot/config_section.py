"""The base of every settings section, in ``bot/config.py`` and the modules beside it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """One table of config.toml: a key it does not name is refused (a misspelt key would
    otherwise leave its setting at the default unnoticed), and its values never change once
    loaded."""

    model_config = ConfigDict(extra="forbid", frozen=True)
