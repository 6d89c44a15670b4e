"""Is a Telegram bot token good? One ``getMe`` through python-telegram-bot, for ``companion
setup`` and ``companion doctor``: the bot's @username, or one line saying what to fix. The
partners' own bots (``[telegram.bots]``) are asked the same way, each at the same API base."""

from __future__ import annotations

from telegram import Bot
from telegram.error import InvalidToken, NetworkError, TelegramError

from adapters.base import TokenCheck
from bot.config.platforms import TelegramConfig

PRIVACY_NOTE = (
    "privacy mode is on: in groups only commands, mentions and replies reach the bot "
    "(to let a partner follow a whole group: @BotFather, /setprivacy, Disable)"
)


async def check_telegram_token(config: TelegramConfig) -> TokenCheck:
    if config.token is None:
        return TokenCheck("telegram.token is not set; add the token from @BotFather")
    bot = _bot(config, config.token.get_secret_value())
    try:
        async with bot:  # entering it asks getMe
            me = bot.bot
    except InvalidToken:
        return TokenCheck(
            "telegram.token was rejected by Telegram (401): copy it again from @BotFather"
        )
    except NetworkError as exc:
        return TokenCheck(_unreachable(config, exc))
    except TelegramError as exc:
        return TokenCheck(f"Telegram refused getMe ({exc.message}); check telegram.token")
    notes = () if me.can_read_all_group_messages else (PRIVACY_NOTE,)
    return TokenCheck(None, f"@{me.username}", me.username, notes)


async def check_partner_bots(config: TelegramConfig) -> dict[str, TokenCheck]:
    """Each partner's own bot (``[telegram.bots]``), by partner id: who it is, or what to fix."""
    found = {}
    for partner_id, token in config.bots.items():
        key = f"telegram.bots.{partner_id}"
        bot = _bot(config, token.get_secret_value())
        try:
            async with bot:
                me = bot.bot
        except InvalidToken:
            problem = (
                f"{key} was rejected by Telegram (401): copy the token of {partner_id}'s bot "
                "again from @BotFather, or remove the line (the partner then speaks through "
                "the main bot)"
            )
            found[partner_id] = TokenCheck(problem)
            continue
        except NetworkError as exc:
            found[partner_id] = TokenCheck(f"{key}: {_unreachable(config, exc)}")
            continue
        except TelegramError as exc:
            found[partner_id] = TokenCheck(f"Telegram refused getMe ({exc.message}); check {key}")
            continue
        found[partner_id] = TokenCheck(None, f"@{me.username}", me.username)
    return found


def _bot(config: TelegramConfig, token: str) -> Bot:
    # PTB appends the token to base_url itself
    return Bot(token, base_url=config.base_url) if config.base_url else Bot(token)


def _unreachable(config: TelegramConfig, exc: NetworkError) -> str:
    where = config.base_url or "api.telegram.org"
    return (
        f"cannot reach the Telegram Bot API at {where} ({exc.message}): check the network, "
        "or telegram.base_url for a self-hosted Bot API server"
    )
