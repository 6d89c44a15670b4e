"""Where and how the gateway runs: ``[storage]`` (the data directory or the PostgreSQL database),
``[dispatch]``, ``[workers]`` and ``[leader]`` (several workers on one database), ``[delivery]``
(retrying replies the platform refuses for now) and ``[web]`` (the owner's web page)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bot.config.section import Section

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
