"""Telegram updates as the gateway's events: who wrote, where, and whether the bot was meant.

Pure functions over python-telegram-bot's parsed objects, no I/O. They say what only Telegram
knows; whether a message is a command, addresses a partner and which one, the gateway decides
(``bot/gateway/addressing.py``).

* A private chat is a DM; a group or supergroup is a group; a forum topic is its own
  conversation (``thread_id``), so each topic keeps its own session.
* An @mention of the bot (by username or a text mention) and a reply to one of its messages
  are marked (a forum topic's messages "reply" to the topic's first message: not to us). A
  partner's own bot account (``[telegram.bots]``) is one of ours too: a reply to its message
  is a reply to us, and a mention of it or a reply to it names that partner
  (``Inbound.addressed_partners``).
* Voice notes, audio files and video notes come as voice :class:`~bot.events.Media`, photos
  (and image documents) as photo media, by file id, with the caption as text; a sticker comes
  as its emoji and set name (``[sticker 😂 from set …]``); custom emoji are in the text as
  their alt emoji already. A document comes as an :class:`~bot.events.Attachment` too (for the
  owner's file commands; the gateway drops the photo of a command). Nothing is downloaded
  here: files travel by file id and are fetched later, for a turn or a command that needs
  them. Other media (files without a caption, videos, ...) are :class:`Unsupported`: the
  channel answers with a short line in DMs and ignores them in groups.
* A ``message_reaction`` update (a user set an emoji on a message) is a
  :class:`~bot.events.Reaction`.
* A pressed inline button arrives as its ``callback_data``, typed by that user in answer to
  the bot's message.
* Every event carries its update id: the gateway handles each update once.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
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

from bot.events import Attachment, ChatRef, Inbound, Media, Reaction, Sender, Unsupported

PLATFORM = "telegram"
PRIVATE = Chat.PRIVATE
GROUP_TYPES = frozenset({Chat.GROUP, Chat.SUPERGROUP})


@dataclass(frozen=True)
class BotIdentity:
    user_id: int
    username: str
    partners: tuple[tuple[int, str, str], ...] = ()
    """The partners' own bot accounts: (bot user id, bot username, partner id)."""

    def partner_of(self, user_id: int | None = None, username: str | None = None) -> str | None:
        """The partner whose own bot has this user id (or @username), if any."""
        for bot_id, name, partner_id in self.partners:
            if bot_id == user_id or (username and name.casefold() == username.casefold()):
                return partner_id
        return None


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


def message_event(message: Message, me: BotIdentity) -> Inbound | Unsupported | None:
    """One message as an Inbound, Unsupported, or None (nothing for the gateway)."""
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
    replied = message.reply_to_message
    group = not chat.is_dm  # in a DM everything is for the bot
    return Inbound(
        chat,
        sender_of(user),
        str(message.message_id),
        text or "",
        _utc(message.date),
        mentioned=group and mentions_bot(message, me),
        replied_to_bot=group and replies_to_bot(message, me),
        addressed_partners=partners_meant(message, me) if group else (),
        reply_to_message_id=str(replied.message_id) if replied is not None else None,
        attachment=attachment_of(message),
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
    if document is not None and is_image:
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
    # the button belongs to our message: pressing it answers us
    user = sender_of(query.from_user)
    return Inbound(where, user, f"cb{query.id}", query.data, datetime.now(UTC), mentioned=True)


def update_event(update: Update, me: BotIdentity) -> Inbound | Unsupported | Reaction | None:
    """What the update means for the gateway, carrying its update id (handled once)."""
    event: Inbound | Unsupported | Reaction | None = None
    if update.message_reaction is not None:
        event = reaction_event(update.message_reaction)
    elif update.callback_query is not None:
        event = callback_event(update.callback_query)
    elif update.message is not None:
        event = message_event(update.message, me)
    return None if event is None else replace(event, update_id=str(update.update_id))


def mentions_bot(message: Message, me: BotIdentity) -> bool:
    """An @mention of the bot's username, or a text mention of the bot."""
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
    return False


def replies_to_bot(message: Message, me: BotIdentity) -> bool:
    """A reply to one of the bot's messages (or of a partner's own bot). In a forum every
    topic message "replies" to the topic's creation message: not to us."""
    author = _replied_author(message)
    return author is not None and (author == me.user_id or me.partner_of(author) is not None)


def _replied_author(message: Message) -> int | None:
    replied = message.reply_to_message
    if replied is None or replied.forum_topic_created is not None or replied.from_user is None:
        return None
    return replied.from_user.id


def partners_meant(message: Message, me: BotIdentity) -> tuple[str, ...]:
    """The partners whose own bot the message @mentions or replies to, in that order."""
    if not me.partners:
        return ()
    found = [me.partner_of(_replied_author(message))]
    entities = [
        *_fragments(message.text, message.entities),
        *_fragments(message.caption, message.caption_entities),
    ]
    for entity, fragment in entities:
        if entity.type == MessageEntity.MENTION:
            found.append(me.partner_of(username=fragment.removeprefix("@")))
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None:
            found.append(me.partner_of(entity.user.id))
    return tuple(dict.fromkeys(p for p in found if p is not None))


def _fragments(
    text: str | None, entities: Sequence[MessageEntity]
) -> list[tuple[MessageEntity, str]]:
    """Each entity with the text it covers. Offsets count UTF-16 units; one that cuts an
    emoji in half loses that half instead of failing (PTB's parse_entity would raise)."""
    if not text:
        return []
    encoded = text.encode("utf-16-le", "surrogatepass")  # a lone half is dropped below
    return [
        (e, encoded[2 * e.offset : 2 * (e.offset + e.length)].decode("utf-16-le", "ignore"))
        for e in entities
    ]


def _utc(moment: datetime | None) -> datetime:
    if moment is None:
        return datetime.now(UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
