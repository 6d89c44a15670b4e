"""Who talks to which partner: ``[owner]`` (the owner's ids and time zone), ``[access]`` (who else
may write and how often), ``[[bindings]]`` (a chat bound to a partner) and ``[partners]``."""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from bot.config.section import Section


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


class PartnersConfig(Section):
    default: str | None = None
    # what lorebook entries may take per turn: a share of the model's context, at most the cap
    # (0: none), as SillyTavern measures it (docs/cards.md)
    lore_budget_percent: int = Field(25, ge=1, le=100)
    lore_budget_cap: int = Field(8000, ge=0)


def check_timezone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {name!r}; use an IANA name like 'Europe/Lisbon'"
        ) from exc
