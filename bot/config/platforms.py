"""The chat platforms' settings: ``[telegram]`` and ``[discord]`` — tokens, the endpoints tests
and self-hosted servers point the clients at, how updates arrive, and which of the Discord
bot's shards this worker connects (docs/workers.md)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bot.config.section import Section


def token_not_empty(value: SecretStr | None) -> SecretStr | None:
    """An empty token would get as far as the platform's client and fail there with a trace."""
    if value is not None and not value.get_secret_value().strip():
        raise ValueError("is empty; set the bot token, or remove the key to run without it")
    return value


BOT_TOKEN = re.compile(r"^[0-9]+:[A-Za-z0-9_-]+$")
"""What @BotFather hands out: the bot's id, a colon, then letters, digits, ``_`` and ``-``."""


class TelegramConfig(Section):
    token: SecretStr | None = None
    _token = field_validator("token")(token_not_empty)
    bots: dict[str, SecretStr] = Field(default_factory=dict)
    """``[telegram.bots]``: a partner id -> the token of that partner's own bot account, which
    sends its group messages; it only sends, the main bot (``token``) receives everything."""
    base_url: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = 8443
    webhook_url: str | None = Field(None, validate_default=True)
    webhook_secret: SecretStr | None = None
    stream: bool = False
    rate_limit: bool = False
    poll_timeout_seconds: int = Field(30, ge=1, le=50)
    watchdog_seconds: int = Field(120, ge=1)

    @field_validator("watchdog_seconds")
    @classmethod
    def _longer_than_a_poll(cls, value: int, info: ValidationInfo) -> int:
        poll = info.data.get("poll_timeout_seconds")
        if poll is not None and value <= poll:
            # a healthy long poll lasts poll_timeout_seconds: a shorter watchdog would cut it
            raise ValueError(f"must be longer than poll_timeout_seconds ({poll})")
        return value

    @field_validator("bots")
    @classmethod
    def _partner_tokens(
        cls, value: dict[str, SecretStr], info: ValidationInfo
    ) -> dict[str, SecretStr]:
        if value and "token" in info.data and info.data["token"] is None:
            raise ValueError(
                "needs telegram.token as well: the main bot receives the groups' messages, "
                "the partners' bots only send"
            )
        main: SecretStr | None = info.data.get("token")
        owners: dict[str, str] = {}
        for partner_id, token in value.items():
            secret = token.get_secret_value()
            if not BOT_TOKEN.match(secret):
                raise ValueError(
                    f"{partner_id}: not a bot token (a number, a colon, then letters and "
                    "digits, as @BotFather gives it); copy the token of that partner's bot again"
                )
            if main is not None and secret == main.get_secret_value():
                raise ValueError(
                    f"{partner_id}: is telegram.token itself; give the partner a bot of its own "
                    "(@BotFather, /newbot), or remove the line to let it speak through the main bot"
                )
            if secret in owners:
                raise ValueError(
                    f"{partner_id} and {owners[secret]} have the same token; each partner "
                    "needs a bot of its own (@BotFather, /newbot)"
                )
            owners[secret] = partner_id
        return value

    @field_validator("webhook_url")
    @classmethod
    def _needed_for_webhooks(cls, value: str | None, info: ValidationInfo) -> str | None:
        if info.data.get("mode") == "webhook" and not value:
            raise ValueError('mode = "webhook" needs the public HTTPS address Telegram calls')
        return value


SHARD_IDS_FORM = 'a list like [0, 1] or ranges like "0-3" or "0-1,4"'
SHARD_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_SHARD_RANGE = 100_000
"""More shards than any bot runs: a longer range is a typo, refused before it is spelled out."""


def parse_shard_ids(value: object) -> object:
    """``discord.shard_ids`` as written: a list, one number, or ranges in a string (what
    ``${ENV}`` gives, so one compose service can hand each replica its own)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, str):
        return value
    ids: list[int] = []
    for part in value.split(","):
        match = SHARD_RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"{part.strip()!r} is not a shard id or range; write {SHARD_IDS_FORM}")
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise ValueError(f"the range {part.strip()!r} runs backwards; write {SHARD_IDS_FORM}")
        if last - first >= MAX_SHARD_RANGE:
            raise ValueError(f"the range {part.strip()!r} names more shards than any bot has")
        ids.extend(range(first, last + 1))
    return ids


class DiscordConfig(Section):
    token: SecretStr | None = None
    _token = field_validator("token")(token_not_empty)
    api_base: str | None = None
    gateway_url: str | None = None
    shards: Literal["auto"] | int | None = None
    """How many shards the bot has in all: "auto" asks Discord, a number fixes it."""
    shard_ids: list[int] | None = None
    """The shards this worker connects (docs/workers.md); unset: every shard, or,
    with several workers on PostgreSQL, the worker's share, by lease (bot/workers/shards.py)."""
    stream: bool = False
    answer_bots: bool = False
    missed_max_age_minutes: int = Field(30, ge=0)

    @field_validator("shards")
    @classmethod
    def _at_least_one(cls, value: Literal["auto"] | int | None) -> Literal["auto"] | int | None:
        if isinstance(value, int) and value < 1:
            raise ValueError('must be at least 1 (the number of shards in all), or "auto"')
        return value

    _shard_ids_form = field_validator("shard_ids", mode="before")(parse_shard_ids)

    @field_validator("shard_ids")
    @classmethod
    def _within_the_count(cls, value: list[int] | None, info: ValidationInfo) -> list[int] | None:
        if value is None:
            return None
        if not value:
            raise ValueError(f"names no shard; write {SHARD_IDS_FORM}, or leave it out")
        if "shards" not in info.data:
            return value  # discord.shards is wrong itself, and says so
        count = info.data["shards"]
        if not isinstance(count, int):
            # "auto" would let each worker ask Discord on its own and perhaps hear different
            # counts: then a guild's events would reach two workers, or none
            raise ValueError(
                "set discord.shards to the total number of shards across all workers (a number, "
                'the same on every worker; not "auto") to connect only some of them'
            )
        for shard in value:
            if not 0 <= shard < count:
                raise ValueError(
                    f"{shard} is not a shard of discord.shards = {count} (0 to {count - 1})"
                )
        repeated = next((shard for shard in value if value.count(shard) > 1), None)
        if repeated is not None:
            raise ValueError(f"shard {repeated} is named twice; name each shard once")
        return value
