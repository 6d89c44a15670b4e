"""Discord messages and interactions as the gateway's events: where, who, and what only Discord
knows. Functions over discord.py's parsed objects, no I/O. Whether a message is a command,
addresses a partner and which one, the gateway decides (``bot/gateway/addressing.py``).

* A DM is keyed by the *user's* id (not the DM channel's), so ``ChatRef("discord", user_id,
  "dm")`` is how the gateway reaches a user; the channel resolves the DM channel itself.
* A server text channel is a group keyed by its channel id. A thread is keyed by its parent
  channel's id with ``thread_id`` set: bindings made on a channel cover its threads, and every
  thread is its own session.
* An @mention of the bot and a reply to one of its (or its persona webhooks') messages are
  marked, with the persona's name a replied-to webhook message went out under.
* The bot's own messages, its webhooks' and its interaction responses are never events; other
  bots' messages only when ``discord.answer_bots`` is on.
* A voice message, audio or image attachment comes as :class:`~bot.events.Media`, stickers as
  ``[sticker NAME]`` (``adapters/discord_media.py``); the first file also as an
  :class:`~bot.events.Attachment` (for an owner command), the names of files nobody reads
  beside. Nothing is downloaded here: files travel by URL and are
  fetched later, for a turn or an owner command that needs them.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import discord

from adapters.discord_media import attachment_kind, media_of, sticker_text
from bot.events import Attachment, ChatRef, Inbound, Sender, Unsupported

PLATFORM = "discord"
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
    *,
    answer_bots: bool = False,
    late: bool = False,
) -> Inbound | Unsupported | None:
    """One message as an Inbound, Unsupported, or None (nothing for the gateway). ``late``:
    fetched after a reconnect and too old to answer."""
    if me.wrote(message, own_webhooks) or message.type not in CONVERSATION_TYPES:
        return None  # our own echoes, joins, pins, thread-created notices
    if message.author.bot and not answer_bots:
        return None  # other bots and webhooks: no bot-to-bot loops unless asked for
    chat = chat_of(message.channel, message.author)
    if chat is None:
        return None
    text = message_text(message)
    media = media_of(message)
    if not text.strip() and media is None:
        return Unsupported(chat, str(message.id), late=late) if message.attachments else None
    reference = message.reference
    replied = _replied_message(message)
    to_bot = replied is not None and me.wrote(replied, own_webhooks)
    return Inbound(
        chat,
        sender_of(message.author),
        str(message.id),
        text,
        message.created_at,
        mentioned=mentions_bot(message, me),
        replied_to_bot=to_bot,
        replied_as=replied.author.name if to_bot and replied and replied.webhook_id else None,
        late=late,
        reply_to_message_id=str(reference.message_id)
        if reference and reference.message_id
        else None,
        attachment=attachment_of(message),
        media=media,
        file_names=tuple(
            a.filename for a in message.attachments if attachment_kind(message, a) is None
        ),
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
    """The text with mentions shown as names (``@Mira``, ``#general``) rather than ids, and
    its stickers named."""
    text = message.clean_content
    if message.stickers:
        text = f"{text} {sticker_text(message)}".strip()
    return text


def mentions_bot(message: discord.Message, me: BotIdentity) -> bool:
    """An @mention of the bot."""
    return me.user_id in message.raw_mentions or any(u.id == me.user_id for u in message.mentions)


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
    return Inbound(
        chat, sender_of(user), f"i{interaction.id}", text, interaction.created_at, mentioned=True
    )
