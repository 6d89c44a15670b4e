"""Telegram updates as the gateway's events: who wrote, where, and whether the bot was meant.

Pure functions over python-telegram-bot's parsed objects, no I/O: the channel fetches what
they need (the bot's identity, the partners bound to a group) and acts on the result.

* A private chat is a DM; a group or supergroup is a group; a forum topic is its own
  conversation (``thread_id``), so each topic keeps its own session.
* In a group the bot is *addressed* by an @mention, a reply to one of its messages, a command
  naming it (``/cmd@thisbot``) or a user command (``/help``; an unknown one or ``/admin`` is
  chatter, as on Discord), or the name of a partner bound to that chat. Anything else is
  context for the next answered turn.
* Voice notes, audio files and video notes come as voice :class:`~bot.events.Media`, photos
  (and image documents) as photo media, by file id, with the caption as text; a sticker comes
  as its emoji and set name (``[sticker 😂 from set …]``); custom emoji are in the text as
  their alt emoji already. A document with a caption comes as an
  :class:`~bot.events.Attachment` (for the owner's file commands). Nothing is downloaded
  here: files travel by file id and are fetched later, for a turn or a command that needs
  them. Other media (files without a caption, videos, ...) are :class:`Unsupported`: the
  channel answers with a short line in DMs and ignores them in groups.
* A ``message_reaction`` update (a user set an emoji on a message) is a
  :class:`~bot.events.Reaction`.
* A pressed inline button arrives as its ``callback_data``, a command, typed by that user.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from telegram import (
    CallbackQuery,
    Chat,
    Message,
    MessageEntity,
    MessageReactionUpdated,
    ReactionTypeEmoji,
    Update,
    User,
)
from telegram.warnings import PTBDeprecationWarning

from bot.commands.table import is_user_command, parse_command
from bot.events import Attachment, ChatRef, Inbound, Media, Reaction, Sender

PLATFORM = "telegram"
PRIVATE = Chat.PRIVATE
GROUP_TYPES = frozenset({Chat.GROUP, Chat.SUPERGROUP})


@dataclass(frozen=True)
class BotIdentity:
    user_id: int
    username: str


@dataclass(frozen=True)
class Unsupported:
    """A message the gateway cannot read (a sticker, a voice note, a file, ...)."""

    chat: ChatRef
    message_id: str


def chat_of(message: Message) -> ChatRef | None:
    """Where ``message`` was written, or None for chats the gateway does not serve
    (channels: a channel post has no sender to answer)."""
    chat = message.chat
    if chat.type == PRIVATE:
        return ChatRef(PLATFORM, str(chat.id), "dm", title=chat.full_name or None)
    if chat.type not in GROUP_TYPES:
        return None
    thread = None
    if message.is_topic_message and message.message_thread_id is not None:
        thread = str(message.message_thread_id)
    return ChatRef(PLATFORM, str(chat.id), "group", thread_id=thread, title=chat.title)


def sender_of(user: User) -> Sender:
    return Sender(PLATFORM, str(user.id), user.full_name or str(user.id), user.username)


def message_event(
    message: Message, me: BotIdentity, partners: Sequence[tuple[str, str]] = ()
) -> Inbound | Unsupported | None:
    """One message as an Inbound, Unsupported, or None (nothing for the gateway).

    ``partners`` are (id, name) of the partners bound to the message's chat."""
    chat = chat_of(message)
    user = message.from_user
    if chat is None or user is None or user.is_bot:
        return None  # channel posts, anonymous admins, and bots (ours included): no loops
    text = message.text if message.text is not None else message.caption
    media = media_of(message)
    if message.sticker is not None:
        text = sticker_text(message)
    if not text and media is None:
        if message.effective_attachment is None:
            return None  # service messages: members joining, pins, topic edits
        return Unsupported(chat, str(message.message_id))
    text = text or ""
    addressed, hint = True, None
    if not chat.is_dm:
        hint = named_partner(text, partners)
        addressed = hint is not None or addresses_bot(message, me)
    replied = message.reply_to_message
    return Inbound(
        chat,
        sender_of(user),
        str(message.message_id),
        text,
        _utc(message.date),
        addressed=addressed,
        partner_hint=hint,
        reply_to_message_id=str(replied.message_id) if replied is not None else None,
        attachment=attachment_of(message) if media is None else None,
        media=media,
    )


def attachment_of(message: Message) -> Attachment | None:
    """A document (an edited persona file, a character card) by file id, not fetched: only
    the owner's command that reads it fetches it, once the gateway knows who sent it."""
    document = message.document
    if document is None:
        return None
    return Attachment(document.file_name or "document", document.file_id, document.file_size)


def media_of(message: Message) -> Media | None:
    """A voice note (voice, audio, video note) or a photo (the largest size, or an image
    sent as a document), by file id; None for anything else."""
    spoken = message.voice or message.audio or message.video_note
    if spoken is not None:
        return Media(
            "voice",
            spoken.file_id,
            getattr(spoken, "mime_type", None) or ("video/mp4" if message.video_note else None),
            _seconds(spoken),
            spoken.file_size,
            getattr(spoken, "file_name", None) or _voice_name(message),
        )
    if message.photo:
        largest = max(message.photo, key=lambda p: p.width * p.height)
        return Media("photo", largest.file_id, "image/jpeg", size=largest.file_size)
    document = message.document
    is_image = document is not None and (document.mime_type or "").startswith("image/")
    if document is not None and is_image and parse_command(message.caption or "") is None:
        return Media(
            "photo", document.file_id, document.mime_type, None, document.file_size,
            document.file_name,
        )  # fmt: skip
    return None


def _voice_name(message: Message) -> str:
    """The name a transcription endpoint goes by to tell the format (Telegram sends none)."""
    return "video-note.mp4" if message.video_note is not None else "voice.ogg"


def _seconds(medium: object) -> float | None:
    """A medium's duration, whether PTB gives it as int seconds or a timedelta."""
    with warnings.catch_warnings():
        # PTB 22 warns that the int form will become a timedelta: both are handled here.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = getattr(medium, "duration", None)
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) if isinstance(value, int | float) else None


def sticker_text(message: Message) -> str:
    """A sticker as text the partner can read: ``[sticker 😂 from set Cats]``."""
    sticker = message.sticker
    assert sticker is not None
    emoji = f" {sticker.emoji}" if sticker.emoji else ""
    where = f" from set {sticker.set_name}" if sticker.set_name else ""
    return f"[sticker{emoji}{where}]"


def reaction_event(update: MessageReactionUpdated) -> Reaction | None:
    """A user's new emoji reaction; None for removals, anonymous reactions, custom emoji."""
    chat = update.chat
    user = update.user
    if user is None or user.is_bot:
        return None
    emoji = next((r.emoji for r in update.new_reaction if isinstance(r, ReactionTypeEmoji)), None)
    if emoji is None:
        return None
    if chat.type == PRIVATE:
        where = ChatRef(PLATFORM, str(chat.id), "dm", title=chat.full_name or None)
    elif chat.type in GROUP_TYPES:
        where = ChatRef(PLATFORM, str(chat.id), "group", title=chat.title)
    else:
        return None
    return Reaction(where, sender_of(user), str(update.message_id), emoji, _utc(update.date))


def callback_event(query: CallbackQuery) -> Inbound | None:
    """A pressed button: its data (a command) as a message from the user who pressed it."""
    message = query.message
    if message is None or not query.data or query.from_user.is_bot:
        return None
    chat = message.chat
    if chat.type == PRIVATE:
        where = ChatRef(PLATFORM, str(chat.id), "dm", title=chat.full_name or None)
    elif chat.type in GROUP_TYPES:
        thread = None
        if isinstance(message, Message) and message.is_topic_message:
            thread = str(message.message_thread_id)
        where = ChatRef(PLATFORM, str(chat.id), "group", thread_id=thread, title=chat.title)
    else:
        return None
    # the button belongs to our message, so pressing it addresses us
    return Inbound(
        where, sender_of(query.from_user), f"cb{query.id}", query.data, datetime.now(UTC)
    )


def update_event(
    update: Update, me: BotIdentity, partners: Sequence[tuple[str, str]] = ()
) -> Inbound | Unsupported | Reaction | None:
    if update.message_reaction is not None:
        return reaction_event(update.message_reaction)
    if update.callback_query is not None:
        return callback_event(update.callback_query)
    if update.message is not None:
        return message_event(update.message, me, partners)
    return None


def addresses_bot(message: Message, me: BotIdentity) -> bool:
    """An @mention, a reply to the bot, a command naming it (``/cmd@thisbot``) or a user
    command without a name (not an unknown one, nor ``/admin``: see
    :func:`bot.commands.table.is_user_command`)."""
    handle = f"@{me.username}".casefold()
    entities = [
        *_fragments(message.text, message.entities),
        *_fragments(message.caption, message.caption_entities),
    ]
    for entity, fragment in entities:
        if entity.type == MessageEntity.MENTION and fragment.casefold() == handle:
            return True
        mentioned = entity.user.id if entity.user is not None else None
        if entity.type == MessageEntity.TEXT_MENTION and mentioned == me.user_id:
            return True
        is_command = entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0
        if is_command and _command_for_us(fragment, me):
            return True
    replied = message.reply_to_message
    # In a forum every topic message "replies" to the topic's creation message: not to us.
    return (
        replied is not None
        and replied.forum_topic_created is None
        and replied.from_user is not None
        and replied.from_user.id == me.user_id
    )


def _command_for_us(command: str, me: BotIdentity) -> bool:
    """``/cmd@thisbot``, or a user command that names no bot (see the module's docstring)."""
    name, _, target = command.removeprefix("/").partition("@")
    if target:
        return target.casefold() == me.username.casefold()
    return is_user_command(name)


def _fragments(
    text: str | None, entities: Sequence[MessageEntity]
) -> list[tuple[MessageEntity, str]]:
    """Each entity with the text it covers. Offsets count UTF-16 units; one that cuts an
    emoji in half loses that half instead of failing (PTB's parse_entity would raise)."""
    if not text:
        return []
    encoded = text.encode("utf-16-le")
    return [
        (e, encoded[2 * e.offset : 2 * (e.offset + e.length)].decode("utf-16-le", "ignore"))
        for e in entities
    ]


def named_partner(text: str, partners: Sequence[tuple[str, str]]) -> str | None:
    """The id of the first bound partner whose name appears in ``text`` as a whole word."""
    for partner_id, name in partners:
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return partner_id
    return None


def _utc(moment: datetime | None) -> datetime:
    if moment is None:
        return datetime.now(UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
