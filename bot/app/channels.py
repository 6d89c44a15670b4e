"""Building the channels, and the platforms' token checks: the composition root's, so the
command line never imports a channel module itself (``tests/test_layers.py``). Each platform's
module is imported when it is needed, so a command that uses none starts without its SDK."""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.base import Channel, TokenCheck
from bot.config.model import Config
from bot.workers.shards import shards_leased


def platform_channels(config: Config) -> dict[str, Channel]:
    """A channel for each platform whose token is set."""
    channels: dict[str, Channel] = {}
    if config.telegram.token is not None:
        from adapters.telegram_channel import TelegramChannel

        channels["telegram"] = TelegramChannel(config.telegram, config.owner.telegram_ids)
    if config.discord.token is not None:
        from adapters.discord_channel import DiscordChannel

        channels["discord"] = DiscordChannel(config.discord, shards_assigned=shards_leased(config))
    return channels


@dataclass(frozen=True)
class Console:
    """The terminal as a channel, for ``companion chat``: what the command line drives."""

    channels: dict[str, Channel]
    chat_key: str
    """The console's one chat, a DM with the person at the terminal."""
    interactive: bool
    """A person at a terminal (not a pipe): Ctrl-C is then the console's, not the process's."""
    finished: asyncio.Event
    """Set when input ends (Ctrl-D, or the end of a pipe)."""
    user_name: str
    """The person at the terminal, by the name partners call them (:func:`console_user_name`)."""


def console(config: Config) -> Console:
    """The console channel, its log lines sent to a file from now on when it is a terminal
    (building the gateway logs too)."""
    from adapters.console_channel import CONSOLE_CHAT, ConsoleChannel

    name = console_user_name(config)
    channel = ConsoleChannel(exports=config.data_dir / "exports", user_name=name)
    channel.keep_logs_off_the_terminal()
    return Console(
        {"console": channel}, CONSOLE_CHAT.key, channel.interactive, channel.finished, name
    )


def console_user_name(config: Config) -> str:
    """The console's one user is the owner: ``owner.name`` if set, else the login name (a
    partner's ``{{user}}`` reads "Ana arrives…", not "you arrives…"); "you" if the system
    knows no login name (a container run under a bare user id)."""
    if config.owner.name and config.owner.name.strip():
        return config.owner.name.strip()
    try:
        return getpass.getuser() or "you"
    except (OSError, KeyError):  # no LOGNAME/USER and no passwd entry for this user id
        return "you"


def partner_bot_checker() -> Callable[[Config], Awaitable[dict[str, TokenCheck]]]:
    """The check of the partners' own Telegram bots (``[telegram.bots]``), for ``doctor``."""
    from adapters.telegram_check import check_partner_bots

    return lambda config: check_partner_bots(config.telegram)


def token_checkers() -> dict[str, Callable[[Config], Awaitable[TokenCheck]]]:
    """Each platform's token check (``companion setup`` and ``doctor``)."""
    from adapters.discord_check import check_discord_token
    from adapters.telegram_check import check_telegram_token

    return {
        "telegram": lambda config: check_telegram_token(config.telegram),
        "discord": lambda config: check_discord_token(config.discord),
    }
