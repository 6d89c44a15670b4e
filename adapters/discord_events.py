"""Discord messages and interactions as the gateway's events: where, who, and whether the
bot was meant. Functions over discord.py's parsed objects, no I/O: the channel fetches what
they need (the partners bound to a channel) and acts on the result.

* A DM is keyed by the *user's* id (not the DM channel's), so ``ChatRef("discord", user_id,
  "dm")`` is how the gateway reaches a user; the channel resolves the DM channel itself.
* A server text channel is a group keyed by its channel id. A thread is keyed by its parent
  channel's id with ``thread_id`` set: bindings made on a channel cover its threads, and every
  thread is its own session.
* In a server the bot is *addressed* by an @mention, a reply to one of its (or its persona
  webhooks') messages, a user command (``/help``; an unknown one or ``/admin`` is chatter),
  or the name of a partner bound there. Anything else is context for the next answered turn.
* The bot's own messages, its webhooks' and its interaction responses are never events; other
  bots' messages only when ``discord.answer_bots`` is on.
* A voice message, audio or image attachment comes as :class:`~bot.events.Media`, stickers as
  ``[sticker NAME]`` (``adapters/discord_media.py``); the file of a command as an
  :class:`~bot.events.Attachment`. Nothing is downloaded here: files travel by URL and are
  fetched later, for a turn or an owner command that needs them.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from dataclasses import dataclass

import discord

from adapters.discord_media import attachment_kind, media_of, sticker_text
from bot.commands.table import is_user_command, parse_command
from bot.events import Attachment, ChatRef, Inbound, Sender

PLATFORM = "discord"
UNSUPPORTED_REPLY = "Sorry — I can't open that kind of file. Could you write it down for me?"
CONVERSATION_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


@dataclass(frozen=True)
class BotIdentity:
    user_id: int
    application_id: int | None

    def wrote(self, message: discord.Message, own_webhooks: Container[int]) -> bool:
        """The bot's own message: sent as the bot, through one of its persona webhooks, or as
        an answer to an interaction (those carry the application's id)."""
        if message.author.id == self.user_id:
            return True
        if message.webhook_id is None:
            return False
        return (
            message.webhook_id in own_webhooks
            or message.webhook_id == self.application_id
            or (self.application_id is not None and message.application_id == self.application_id)
        )


@dataclass(frozen=True)
class Unsupported:
    """A message with nothing to read (an attachment without text, a sticker)."""

    chat: ChatRef
    message_id: str


def chat_of(channel: object, user: discord.abc.User) -> ChatRef | None:
    """Where a message or command from ``user`` in ``channel`` belongs; None for places the
    gateway does not serve (voice channels, group DMs, forums themselves)."""
    if isinstance(channel, discord.DMChannel):
        return ChatRef(PLATFORM, str(user.id), "dm", title=user.display_name)
    if isinstance(channel, discord.Thread):
        return ChatRef(
            PLATFORM, str(channel.parent_id), "group", thread_id=str(channel.id),
            title=f"#{channel.name}",
        )  # fmt: skip
    if isinstance(channel, discord.TextChannel):
        return ChatRef(PLATFORM, str(channel.id), "group", title=f"#{channel.name}")
    return None


def sender_of(user: discord.abc.User) -> Sender:
    return Sender(PLATFORM, str(user.id), user.display_name, user.name)


def message_event(
    message: discord.Message,
    me: BotIdentity,
    own_webhooks: Container[int],
    partners: Sequence[tuple[str, str]] = (),
    *,
    answer_bots: bool = False,
) -> Inbound | Unsupported | None:
    """One message as an Inbound, Unsupported, or None (nothing for the gateway).

    ``partners`` are (id, name) of the partners bound to the message's channel."""
    if me.wrote(message, own_webhooks) or message.type not in CONVERSATION_TYPES:
        return None  # our own echoes, joins, pins, thread-created notices
    if message.author.bot and not answer_bots:
        return None  # other bots and webhooks: no bot-to-bot loops unless asked for
    chat = chat_of(message.channel, message.author)
    if chat is None:
        return None
    text = message_text(message)
    media = media_of(message) if parse_command(text) is None else None
    if not text.strip() and media is None:
        return Unsupported(chat, str(message.id)) if message.attachments else None
    addressed, hint = True, None
    if not chat.is_dm:
        hint = named_partner(text, partners) or _replied_partner(
            message, me, own_webhooks, partners
        )
        addressed = hint is not None or addresses_bot(message, me, own_webhooks)
    reference = message.reference
    return Inbound(
        chat,
        sender_of(message.author),
        str(message.id),
        text,
        message.created_at,
        addressed=addressed,
        partner_hint=hint,
        reply_to_message_id=str(reference.message_id)
        if reference and reference.message_id
        else None,
        attachment=attachment_of(message) if media is None else None,
        media=media,
    )


def attachment_of(message: discord.Message) -> Attachment | None:
    """The message's first file (an edited persona file, a character card) by URL, not
    fetched: only the owner's command that reads it fetches it, once the gateway knows who
    sent it."""
    if not message.attachments:
        return None
    first = message.attachments[0]
    return Attachment(first.filename, first.url, first.size)


def message_text(message: discord.Message) -> str:
    """The text with mentions shown as names (``@Mira``, ``#general``) rather than ids, plus
    a line naming each attachment, which the partner cannot open. A command stays as typed:
    its file (``/admin partner put``) is handed over as the attachment itself."""
    text = message.clean_content
    if message.stickers:
        text = f"{text} {sticker_text(message)}".strip()
    names = [a.filename for a in message.attachments if attachment_kind(message, a) is None]
    if text.strip() and names and parse_command(text) is None:
        text += "\n[attached: " + ", ".join(names) + "]"
    return text


def addresses_bot(message: discord.Message, me: BotIdentity, own_webhooks: Container[int]) -> bool:
    """An @mention of the bot, a reply to one of its messages, or a user command (not an
    unknown one, nor ``/admin``: see :func:`bot.commands.table.is_user_command`)."""
    if me.user_id in message.raw_mentions or any(u.id == me.user_id for u in message.mentions):
        return True
    command = parse_command(message.content)
    if command is not None and is_user_command(command[0]):
        return True
    replied = _replied_message(message)
    return replied is not None and me.wrote(replied, own_webhooks)


def named_partner(text: str, partners: Sequence[tuple[str, str]]) -> str | None:
    """The id of the first bound partner whose name appears in ``text`` as a whole word."""
    for partner_id, name in partners:
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return partner_id
    return None


def _replied_partner(
    message: discord.Message,
    me: BotIdentity,
    own_webhooks: Container[int],
    partners: Sequence[tuple[str, str]],
) -> str | None:
    """A reply to a persona webhook's message is for the partner who wrote it."""
    replied = _replied_message(message)
    if replied is None or replied.webhook_id is None or not me.wrote(replied, own_webhooks):
        return None
    return next((pid for pid, name in partners if name == replied.author.name), None)


def _replied_message(message: discord.Message) -> discord.Message | None:
    reference = message.reference
    if reference is None:
        return None
    resolved = reference.resolved or reference.cached_message
    return resolved if isinstance(resolved, discord.Message) else None


def interaction_event(interaction: discord.Interaction, text: str) -> Inbound | None:
    """A slash command as the command line it stands for, typed by its user where it ran.
    Its id (``i`` + the interaction id) can never clash with a message id."""
    user = interaction.user
    if interaction.guild_id is None:
        chat: ChatRef | None = ChatRef(PLATFORM, str(user.id), "dm", title=user.display_name)
    else:
        chat = chat_of(interaction.channel, user)
    if chat is None:
        return None
    return Inbound(chat, sender_of(user), f"i{interaction.id}", text, interaction.created_at)
