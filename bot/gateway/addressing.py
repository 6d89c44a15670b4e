"""Who a message is for: the gateway's one decision on command, addressing and partner.

A channel hands over what only the platform knows: the text, a mention of the bot, a reply
to one of its messages (and the persona name that message went out under), files by
reference. The rest is decided here, once and the same for every platform:

* **Command**: ``/name args``, or ``/name@thisbot``; ``/name@otherbot`` is not ours. A command
  reads no voice note or photo (its file, if any, is the document it works on), and its text
  stays as typed.
* **Addressed** (groups; a DM always is): a mention of the bot, a reply to it, a command meant
  for it (``/cmd@thisbot``, or a user command: an unknown word or ``/admin`` is chatter,
  perhaps another bot's), the name of a bound partner as a whole word, or a mention of (or
  reply to) a bound partner's own bot account. Anything else is context for the next answered
  turn.
* **Partner** (groups): the bound partner named as a whole word, else the one whose message
  was answered, else the one whose own bot was mentioned, else one named inside a word, else
  the first bound.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from bot.commands.table import is_user_command, parse_command
from bot.events import Inbound

Command = tuple[str, list[str]]


class Named(Protocol):
    """A bound partner as addressing sees it (:class:`partners.persona.Partner`)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class GroupReading:
    addressed: bool
    partner_id: str | None
    """None only where no partner is bound."""


def command_of(inbound: Inbound, bot_username: str | None) -> Command | None:
    """The command the message is, if it is one for this bot: (name, args)."""
    return parse_command(inbound.text, bot_username)


def meant_for_bot(text: str, bot_username: str | None) -> bool:
    """``/cmd@thisbot``, or a user command that names no bot."""
    words = text[1:].split(maxsplit=1) if text.startswith("/") else []
    if not words:
        return False
    name, _, target = words[0].partition("@")
    if target:
        return bot_username is not None and target.casefold() == bot_username.casefold()
    return is_user_command(name)


def as_read(inbound: Inbound, command: Command | None) -> Inbound:
    """The message as the gateway keeps it: a command without the voice note or photo that
    came with it; a conversation message naming the files nobody reads."""
    if command is not None:
        return replace(inbound, media=None) if inbound.media is not None else inbound
    if inbound.file_names and inbound.text.strip():
        named = "\n[attached: " + ", ".join(inbound.file_names) + "]"
        return replace(inbound, text=inbound.text + named)
    return inbound


def read_group(inbound: Inbound, bound: Sequence[Named], bot_username: str | None) -> GroupReading:
    """Whether a group message addresses a partner, and which of the bound ones it is for."""
    hint = (
        named_partner(inbound.text, bound)
        or _replied_partner(inbound, bound)
        or next((p.id for p in bound if p.id in inbound.addressed_partners), None)
    )
    addressed = (
        hint is not None
        or inbound.mentioned
        or inbound.replied_to_bot
        or meant_for_bot(inbound.text, bot_username)
    )
    return GroupReading(addressed, hint or _named_inside(inbound.text, bound))


def named_partner(text: str, partners: Sequence[Named]) -> str | None:
    """The id of the first partner whose name appears in ``text`` as a whole word."""
    for partner in partners:
        name = partner.name
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return partner.id
    return None


def _replied_partner(inbound: Inbound, partners: Sequence[Named]) -> str | None:
    """A reply to a persona's message is for the partner who wrote it."""
    if not inbound.replied_to_bot or inbound.replied_as is None:
        return None
    return next((p.id for p in partners if p.name == inbound.replied_as), None)


def _named_inside(text: str, partners: Sequence[Named]) -> str | None:
    """The first partner named anywhere in ``text`` (inside a word too), else the first."""
    folded = text.casefold()
    first = partners[0].id if partners else None
    return next((p.id for p in partners if p.name.casefold() in folded), first)
