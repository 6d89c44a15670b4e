"""Is a Telegram bot token good? One ``getMe`` through python-telegram-bot, for ``companion
setup`` and ``companion doctor``: the bot's @username, or one line saying what to fix."""

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
    token = config.token.get_secret_value()
    where = config.base_url or "api.telegram.org"
    # PTB appends the token to base_url itself
    bot = Bot(token, base_url=config.base_url) if config.base_url else Bot(token)
    try:
        async with bot:  # entering it asks getMe
            me = bot.bot
    except InvalidToken:
        return TokenCheck(
            "telegram.token was rejected by Telegram (401): copy it again from @BotFather"
        )
    except NetworkError as exc:
        return TokenCheck(
            f"cannot reach the Telegram Bot API at {where} ({exc.message}): check the network, "
            "or telegram.base_url for a self-hosted Bot API server"
        )
    except TelegramError as exc:
        return TokenCheck(f"Telegram refused getMe ({exc.message}); check telegram.token")
    notes = () if me.can_read_all_group_messages else (PRIVACY_NOTE,)
    return TokenCheck(None, f"@{me.username}", me.username, notes)
