"""Buttons on Discord: a reply's choices (``bot/events.py`` :class:`~bot.events.Choice`) as a row of
buttons under the message, as Telegram shows them.

A button's ``custom_id`` is the command it stands for; pressing it arrives as an interaction
that whichever worker receives it hands to the gateway as that command typed by the presser
(:meth:`adapters.discord_commands.SlashCommands.press`). So a view here dispatches nothing
itself: it is stopped before it is sent, and discord.py keeps no record of it (a kept view
would live in one process only, and pile up with every question).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import discord

from bot.events import Choice

MAX_CUSTOM_ID_CHARS = 100
MAX_LABEL_CHARS = 80
MAX_BUTTONS = 25
"""Five rows of five: Discord's limit for one message."""


def choice_view(choices: Sequence[Choice]) -> discord.ui.View | None:
    """One button per choice, five to a row; a command too long for a ``custom_id`` gets no
    button (nor does a repeated one: ids are unique within a message). None: no buttons."""
    view = discord.ui.View(timeout=None)
    seen: set[str] = set()
    for choice in choices:
        command = choice.command
        if len(command) > MAX_CUSTOM_ID_CHARS or command in seen or len(seen) >= MAX_BUTTONS:
            continue
        seen.add(command)
        view.add_item(discord.ui.Button(label=choice.label[:MAX_LABEL_CHARS], custom_id=command))
    if not seen:
        return None
    view.stop()  # see the module: presses reach the gateway as interactions, not through it
    return view


def buttons(choices: Sequence[Choice]) -> dict[str, Any]:
    """The keyword arguments of a send that puts ``choices`` under the message."""
    view = choice_view(choices)
    return {} if view is None else {"view": view}
