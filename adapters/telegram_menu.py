"""Telegram's command menu: the user commands for everyone, the owner's after them in each
owner's own chat with the bot (a menu per chat: nobody else sees /admin there). A refusal is
logged, never raised: the commands work without the menu."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from telegram import Bot, BotCommand, BotCommandScopeChat
from telegram.error import TelegramError

from bot.commands.table import COMMANDS

logger = logging.getLogger(__name__)


def menu(owner: bool) -> list[BotCommand]:
    """The command menu: the user commands, and for an owner the owner's after them."""
    users = [BotCommand(c.name, c.help) for c in COMMANDS.values() if not c.owner_only]
    owners = [BotCommand(c.name, c.help) for c in COMMANDS.values() if c.owner_only]
    return users + owners if owner else users


async def set_menus(bot: Bot, owner_ids: Iterable[int]) -> None:
    """Everyone's menu, then each owner's."""
    try:
        await bot.set_my_commands(menu(owner=False))
        for owner_id in owner_ids:
            await bot.set_my_commands(menu(owner=True), scope=BotCommandScopeChat(owner_id))
    except TelegramError as exc:
        logger.warning("telegram: command menu not set (%s); commands still work", exc)


async def show_owner_menu(bot: Bot, user_id: int) -> None:
    """A new owner's menu, with the owner's commands."""
    try:
        await bot.set_my_commands(menu(owner=True), scope=BotCommandScopeChat(user_id))
    except TelegramError as exc:
        logger.warning("telegram: owner's command menu not set (%s); /admin works", exc)
