"""Discord's media for the gateway: attachments in, voice and stickers out, reactions.

* **In.** A voice message (the message's voice flag, or an attachment with a duration) or an
  audio attachment is voice :class:`~bot.events.Media`; an image attachment is a photo. Both
  are referenced by their attachment URL and fetched only when a turn needs them. Stickers
  arrive as ``[sticker NAME]``. A user's reaction (``on_raw_reaction_add``) is a
  :class:`~bot.events.Reaction`.
* **Out.** discord.py cannot send Discord's own voice messages (they need a waveform and a
  flag its ``send`` does not take), so a spoken reply is an OGG audio attachment with the text
  beside it. Reactions are ``add_reaction``; Discord refuses what is not an emoji (10014).
"""

from __future__ import annotations

import io
import logging

import aiohttp
import discord

from adapters.base import MediaTooBig
from bot.events import ChatRef, Media, MediaKind, Reaction, Sender

logger = logging.getLogger(__name__)

PLATFORM = "discord"
MAX_DOWNLOAD_BYTES = 25 * 1024 * 1024
"""The largest attachment fetched (Discord's default upload limit)."""
VOICE_FILENAME = "reply.ogg"
DOWNLOAD_TIMEOUT_SECONDS = 60.0


def media_of(message: discord.Message) -> Media | None:
    """The first voice note or image among a message's attachments, by URL."""
    for attachment in message.attachments:
        kind = attachment_kind(message, attachment)
        if kind is not None:
            return Media(
                kind,
                attachment.url,
                attachment.content_type,
                attachment.duration,
                attachment.size,
                attachment.filename,
            )
    return None


def attachment_kind(message: discord.Message, attachment: discord.Attachment) -> MediaKind | None:
    content_type = (attachment.content_type or "").split(";")[0]
    if message.flags.voice or attachment.is_voice_message() or content_type.startswith("audio/"):
        return "voice"
    if content_type.startswith("image/"):
        return "photo"
    return None


def sticker_text(message: discord.Message) -> str:
    """A message's stickers as text the partner can read (``[sticker Wave]``)."""
    return " ".join(f"[sticker {sticker.name}]" for sticker in message.stickers)


def reaction_event(
    payload: discord.RawReactionActionEvent, chat: ChatRef, user: discord.abc.User | None
) -> Reaction | None:
    """A user's Unicode emoji reaction; custom emoji and bots' reactions are not. ``user``
    is None when discord.py has not seen them (it is not fetched): the sender then goes by
    the id, and the gateway uses the name it stored when they last wrote."""
    if (user is not None and user.bot) or not payload.emoji.is_unicode_emoji():
        return None
    user_id = str(payload.user_id)
    sender = (
        Sender(PLATFORM, user_id, user.display_name, user.name)
        if user is not None
        else Sender(PLATFORM, user_id, user_id)
    )
    return Reaction(
        chat, sender, str(payload.message_id), payload.emoji.name, discord.utils.utcnow()
    )


async def download(url: str) -> bytes:
    """An attachment's bytes from Discord's CDN (URLs are signed: no token needed)."""
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as response:
        response.raise_for_status()
        if (response.content_length or 0) > MAX_DOWNLOAD_BYTES:
            raise MediaTooBig(f"{response.content_length} bytes")
        data = await response.content.read(MAX_DOWNLOAD_BYTES + 1)
    if len(data) > MAX_DOWNLOAD_BYTES:
        raise MediaTooBig(f"over {MAX_DOWNLOAD_BYTES} bytes")
    return data


def voice_file(audio: bytes) -> discord.File:
    return discord.File(io.BytesIO(audio), filename=VOICE_FILENAME)
