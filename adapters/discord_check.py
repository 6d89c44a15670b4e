"""Is a Discord bot token good? A REST login through discord.py, for ``companion setup`` and
``companion doctor``: the bot's name and its invite URL, or one line saying what to fix —
including the Message Content Intent, without which Discord refuses the gateway connection."""

from __future__ import annotations

import aiohttp
import discord

from adapters.base import TokenCheck
from adapters.discord_client import apply_endpoints
from bot.config.platforms import DiscordConfig

INVITE_PERMISSIONS = 277562330112
"""View Channels, Send Messages, Send Messages in Threads, Read Message History, Manage
Webhooks (partner names and avatars) and Use Application Commands (docs/discord.md)."""
INVITE_SCOPES = ("bot", "applications.commands")
INTENT_OFF = (
    "the Message Content Intent is off, and Discord refuses the connection without it: "
    "Developer Portal -> your application -> Bot -> Privileged Gateway Intents -> switch on "
    "Message Content Intent"
)


def invite_url(application_id: int) -> str:
    return discord.utils.oauth_url(
        application_id,
        permissions=discord.Permissions(INVITE_PERMISSIONS),
        scopes=INVITE_SCOPES,
    )


async def check_discord_token(config: DiscordConfig) -> TokenCheck:
    if config.token is None:
        return TokenCheck("discord.token is not set; add the bot token from the Developer Portal")
    apply_endpoints(config)
    client = discord.Client(intents=discord.Intents.none())
    try:
        await client.login(config.token.get_secret_value())
        application = await client.application_info()
    except discord.LoginFailure:
        return TokenCheck(
            "discord.token was rejected by Discord: copy the bot token again from the "
            "Developer Portal (Bot -> Reset Token)"
        )
    except (aiohttp.ClientError, discord.HTTPException) as exc:
        where = config.api_base or "discord.com"
        return TokenCheck(
            f"cannot reach the Discord API at {where} ({exc}): check the network, or "
            "discord.api_base if you use a proxy"
        )
    finally:
        await client.close()
    name = client.user.name if client.user else application.name
    flags = application.flags
    content = flags.gateway_message_content or flags.gateway_message_content_limited
    notes = (f"invite URL: {invite_url(application.id)}",)
    return TokenCheck(None if content else INTENT_OFF, name, name, notes)
