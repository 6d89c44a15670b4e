"""The bot accounts the Telegram channel speaks through: the main bot, and the partners' own.

The main bot (``telegram.token``) receives everything and sends everything else. A partner
listed under ``[telegram.bots]`` has a bot account of its own, which sends that partner's
messages in groups (its previews, their edits, its reactions, stickers and typing) under the
partner's own name and picture. These bots only send: nothing here ever asks them for
updates, sets their webhook or their command menu, so the one poller of the main bot is never
in conflict with anything (Telegram lets one client poll a token at a time), and a group's
messages, the partners' included, reach the gateway through the main bot alone. A partner
bot never reads: Telegram does not show a bot another bot's messages anyway.

In a direct message a partner speaks through the main bot (the user wrote to that one, and a
bot may not write to someone who never started it). A partner bot that may not speak in a
group (not a member there, removed, its token revoked) gives way to the main bot, which
speaks with the partner's name in front as it does for partners without a bot; the owner is
told once.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import Bot
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, TelegramError
from telegram.ext import AIORateLimiter, ExtBot

from adapters.telegram_send_request import SendRequest
from adapters.telegram_updates import BotIdentity
from bot.config.platforms import TelegramConfig
from bot.events import ChatRef
from bot.text.literal import literal_line

logger = logging.getLogger(__name__)

SEND_POOL_SIZE = 32
PARTNER_POOL_SIZE = 8
"""Connections of a partner's bot: it sends one partner's messages only."""
POOL_TIMEOUT_SECONDS = 10.0
NO_VOICE_HERE = ("chat not found", "not enough rights", "have no rights", "not a member")
"""Telegram's words (in a 400) for a bot that may not write in a chat at all."""


def build_bot(config: TelegramConfig, token: str, pool_size: int = SEND_POOL_SIZE) -> Bot:
    """A Bot that sends (no I/O yet), on a request whose exchanges outlive a cancelled
    caller (``adapters/telegram_send_request.py``); getUpdates goes out on a client of its
    own (``adapters/telegram_poll_client.py``)."""
    options: dict[str, Any] = {
        "token": token,
        "request": SendRequest(pool_size, POOL_TIMEOUT_SECONDS),
    }
    if config.base_url:
        options["base_url"] = config.base_url  # PTB appends the token itself
        options["base_file_url"] = file_url(config.base_url)
    if config.rate_limit:
        return ExtBot(rate_limiter=AIORateLimiter(), **options)
    return Bot(**options)


def file_url(base_url: str) -> str:
    """Where a self-hosted Bot API server serves files: ``…/bot`` becomes ``…/file/bot``
    (Telegram's own layout), so downloads never leave for api.telegram.org."""
    root, _, last = base_url.rstrip("/").rpartition("/")
    return f"{root}/file/{last}" if root else f"{base_url.rstrip('/')}/file"


def may_not_speak(exc: TelegramError) -> bool:
    """Whether ``exc`` says this bot may not write in the chat at all (rather than that one
    message was refused, or Telegram is busy)."""
    if isinstance(exc, InvalidToken | Forbidden):
        return True
    return isinstance(exc, BadRequest) and any(w in exc.message.lower() for w in NO_VOICE_HERE)


class PartnerBots:
    """The partners' own bot accounts (``[telegram.bots]``), which only send."""

    def __init__(self, config: TelegramConfig) -> None:
        self.bots: dict[str, Bot] = {
            partner_id: build_bot(config, token.get_secret_value(), PARTNER_POOL_SIZE)
            for partner_id, token in config.bots.items()
        }
        self.identities: dict[str, BotIdentity] = {}
        """Partner id -> its bot as Telegram knows it (once :meth:`start` asked)."""
        self._silenced: set[tuple[str, str | None]] = set()
        """(partner, chat id) where its bot may not write; chat None: nowhere (its token)."""

    async def start(self) -> list[str]:
        """Ask Telegram who each bot is (``getMe``); what the owner must hear of those that
        do not answer (each then speaks through the main bot)."""
        problems = []
        for partner_id, bot in self.bots.items():
            try:
                await bot.initialize()
            except InvalidToken:
                self._silenced.add((partner_id, None))
                problems.append(refused_token(partner_id))
                continue
            except NetworkError as exc:  # the main bot got through: try again on each send
                logger.warning("telegram: %s's own bot did not answer getMe: %s", partner_id, exc)
                continue
            me = bot.bot
            self.identities[partner_id] = BotIdentity(me.id, me.username or "")
            logger.info("telegram: %s speaks in groups as @%s", partner_id, me.username)
        return problems

    async def stop(self) -> None:
        for bot in self.bots.values():
            await bot.shutdown()

    def speaker(self, partner_id: str | None, chat: ChatRef) -> Bot | None:
        """The partner's own bot where it speaks in ``chat``, else None (the main bot)."""
        if partner_id is None or chat.is_dm:
            return None
        if {(partner_id, None), (partner_id, chat.chat_id)} & self._silenced:
            return None
        return self.bots.get(partner_id)

    def silence(self, partner_id: str, chat: ChatRef, exc: TelegramError) -> str:
        """Its bot may not write in ``chat`` (``exc`` said so): the main bot speaks for the
        partner there from now on. What the owner should hear."""
        everywhere = isinstance(exc, InvalidToken)
        self._silenced.add((partner_id, None if everywhere else chat.chat_id))
        where = chat.title or chat.chat_id
        logger.warning("telegram: %s's own bot may not write in %s: %s", partner_id, where, exc)
        if everywhere:
            return refused_token(partner_id)
        return (
            f"{partner_id}'s own bot may not write in “{literal_line(where)}” "
            f"({literal_line(exc.message)}), so {partner_id} speaks through me there. Add that "
            "bot to the group to let it speak for itself."
        )


def refused_token(partner_id: str) -> str:
    return (
        f"Telegram refused the token of {partner_id}'s own bot (telegram.bots.{partner_id}), "
        f"so {partner_id} speaks through me for now. Copy the token from @BotFather again, or "
        "remove the line."
    )
