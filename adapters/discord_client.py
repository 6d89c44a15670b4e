"""Building discord.py's client: intents, endpoints, sharding.

Intents: guilds, guild messages, DMs and message content (the last must be switched on in the
Developer Portal, docs/discord.md), and reactions. ``discord.api_base`` and
``discord.gateway_url`` point discord.py elsewhere (proxies, tests) before the client is
built; ``discord.shards = "auto"`` runs an AutoShardedClient, a number of shards runs that
many, and ``discord.shard_ids`` only those of them; with shards assigned by the gateway, a
client holding every shard of the bot, none launched until assigned.
"""

from __future__ import annotations

from typing import Any

import discord
import discord.gateway
import discord.http
import yarl

from adapters.discord_delivery import NO_PINGS
from adapters.discord_shards import PacedShardsClient
from bot.config.platforms import DiscordConfig


def apply_endpoints(config: DiscordConfig) -> None:
    """Point discord.py at another REST base / gateway (documented advanced settings)."""
    if config.api_base:
        discord.http.Route.BASE = config.api_base.rstrip("/")
    if config.gateway_url:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(config.gateway_url)


def client_options(guild_ready_timeout: float) -> dict[str, Any]:
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    # users' reactions to a partner's messages are context for its next turn
    intents.guild_reactions = True
    intents.dm_reactions = True
    return {
        "intents": intents,
        "allowed_mentions": NO_PINGS,  # the default for every send; each send sets its own too
        "guild_ready_timeout": guild_ready_timeout,
    }


def build_client(config: DiscordConfig, guild_ready_timeout: float) -> discord.Client:
    options = client_options(guild_ready_timeout)
    if config.shards == "auto":
        return discord.AutoShardedClient(**options)
    if isinstance(config.shards, int):
        if config.shard_ids is not None:  # this worker's part of the bot's shards
            options["shard_ids"] = config.shard_ids
        return discord.AutoShardedClient(shard_count=config.shards, **options)
    return discord.Client(**options)


def assigned_client(
    config: DiscordConfig, guild_ready_timeout: float, identify_interval: float
) -> PacedShardsClient:
    """The client of a worker whose shards the gateway assigns: all ``discord.shards`` of the
    bot (one when unset), none launched until assigned."""
    count = config.shards if isinstance(config.shards, int) else 1
    options = client_options(guild_ready_timeout)
    return PacedShardsClient(identify_interval=identify_interval, shard_count=count, **options)
