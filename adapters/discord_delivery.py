"""Sending on Discord: persona webhooks, mention safety and error mapping (live previews:
``adapters/discord_streams.py``).

* **Persona webhooks.** In server channels a partner speaks through one bot-owned webhook per
  channel, with its own name and avatar on every message (threads use their parent channel's
  webhook with ``thread=``). :class:`PersonaWebhooks` finds the bot's webhook (or creates it)
  once per channel and caches it. Without the Manage Webhooks permission it says so once and
  the channel falls back to normal messages prefixed with the partner's name; so does a
  channel that other people's webhooks already fill (Discord allows 15).
* **Avatars from a file.** ``Webhook.send`` takes an avatar only as a URL, and a partner's
  ``avatar.png`` (a character card's picture) has none that lasts: Discord's attachment URLs
  expire. So a partner with an avatar image gets a webhook of its own in each channel it
  speaks in, created with the image as the webhook's avatar (and changed when the image
  changes). Discord allows 15 webhooks per channel; when a channel has no room left, the
  partner speaks through the shared webhook with its name and without its picture.
* **Mentions.** Every send carries ``allowed_mentions`` that cannot ping @everyone, @here or a
  role, whatever the model wrote: :data:`NO_PINGS` for webhooks and interaction answers,
  :data:`REPLY_PING` (only the author of the answered message) for replies.
* **Errors.** discord.py's exceptions become :class:`~adapters.base.DeliveryError`, retryable
  or not, with the platform's retry-after when there is one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import discord

from adapters.base import DeliveryError
from adapters.discord_buttons import buttons
from bot.events import ChatRef, Outbound

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 2000
WEBHOOK_NAME = "companion-gateway"
PARTNER_WEBHOOK_PREFIX = "companion-gateway:"
"""A partner's own webhook is named ``companion-gateway:<partner id>:<image hash>``."""
MAX_CHANNEL_WEBHOOKS = 15
FORBIDDEN_RETRY_SECONDS = 600.0
"""After a missing permission or a channel full of others' webhooks, how long to use the
fallback before asking Discord again."""
CANNOT_MESSAGE_USER = 50007
UNKNOWN_WEBHOOK = 10015
MAX_WEBHOOKS_REACHED = 30007
WEBHOOK_NAME_WORDS = ("discord", "clyde")
"""Discord refuses webhook usernames containing these words."""

NO_PINGS = discord.AllowedMentions.none()
REPLY_PING = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)


def delivery_error(exc: Exception) -> DeliveryError:
    """discord.py's (and aiohttp's) errors as the gateway's: may trying again help?"""
    if isinstance(exc, discord.RateLimited):
        return DeliveryError(str(exc), retryable=True, retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        if exc.status == 429:
            return DeliveryError(str(exc), retryable=True, retry_after=_retry_after(exc))
        if isinstance(exc, discord.Forbidden) and exc.code == CANNOT_MESSAGE_USER:
            # the user closed their DMs or blocked the bot
            return DeliveryError(str(exc), retryable=False, unreachable=True)
        # 5xx that outlasted discord.py's own retries: Discord may be back in a moment
        return DeliveryError(str(exc), retryable=exc.status >= 500)
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | OSError):
        return DeliveryError(f"network: {exc!r}", retryable=True)
    return DeliveryError(str(exc), retryable=False)


def _retry_after(exc: discord.HTTPException) -> float | None:
    header = getattr(exc.response, "headers", {}).get("Retry-After")
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None


def webhook_username(name: str) -> str:
    """A partner's name as a webhook username: Discord refuses "discord" and "clyde" in one,
    so a zero-width space breaks those words up without changing what people see."""
    for word in WEBHOOK_NAME_WORDS:
        start = name.casefold().find(word)
        while start != -1:
            name = name[: start + 1] + "\u200b" + name[start + 1 :]
            start = name.casefold().find(word, start + 2)
    return name[:80]


def avatar_url(avatar: str | None) -> str | None:
    """preset.yml ``avatar`` as a webhook avatar: only an http(s) URL works (docs/discord.md)."""
    if avatar and avatar.startswith(("https://", "http://")):
        return avatar
    return None


MissingPermission = Callable[[discord.TextChannel], Awaitable[None]]
GroupTarget = discord.TextChannel | discord.Thread


class PersonaWebhooks:
    """One bot-owned webhook per channel, looked up or created once and then cached."""

    def __init__(self, client: discord.Client, on_missing_permission: MissingPermission) -> None:
        self._client = client
        self._on_missing_permission = on_missing_permission
        self._hooks: dict[int, discord.Webhook] = {}
        self._partner_hooks: dict[tuple[int, str], discord.Webhook] = {}
        self._fallback_until: dict[int, float] = {}
        self._told: set[int] = set()
        self._locks: dict[int, asyncio.Lock] = {}
        self.own_ids: set[int] = set()
        """Ids of the bot's webhooks, so their messages are recognised as the bot's own."""

    async def get(self, channel: discord.TextChannel) -> discord.Webhook | None:
        """The channel's persona webhook, or None when the bot may not manage webhooks."""
        if (hook := self._hooks.get(channel.id)) is not None:
            return hook
        if time.monotonic() < self._fallback_until.get(channel.id, 0.0):
            return None
        async with self._locks.setdefault(channel.id, asyncio.Lock()):
            if (hook := self._hooks.get(channel.id)) is not None:
                return hook
            try:
                hook = await self._find_or_create(channel)
            except discord.Forbidden:
                self._fallback_until[channel.id] = time.monotonic() + FORBIDDEN_RETRY_SECONDS
                if channel.id not in self._told:
                    self._told.add(channel.id)
                    await self._on_missing_permission(channel)
                return None
            except discord.HTTPException as exc:
                if exc.code != MAX_WEBHOOKS_REACHED:
                    raise
                # other people's webhooks fill the channel: speak as the bot, try again later
                logger.warning(
                    "discord: #%s already has %d webhooks, none of them ours; partners speak "
                    "there as the bot, with their names in front",
                    channel.name,
                    MAX_CHANNEL_WEBHOOKS,
                )
                self._fallback_until[channel.id] = time.monotonic() + FORBIDDEN_RETRY_SECONDS
                return None
            self._hooks[channel.id] = hook
            self.own_ids.add(hook.id)
            return hook

    async def _find_or_create(self, channel: discord.TextChannel) -> discord.Webhook:
        me = self._client.user
        for hook in await channel.webhooks():
            # a webhook the bot created carries the bot as its user, and its token
            if hook.user is not None and me is not None and hook.user.id == me.id and hook.token:
                return hook
        logger.info("discord: creating the persona webhook in #%s", channel.name)
        return await channel.create_webhook(name=WEBHOOK_NAME, reason="partner personas")

    def forget(self, channel_id: int) -> None:
        """The webhook was deleted by someone: find or create it again next time."""
        hook = self._hooks.pop(channel_id, None)
        if hook is not None:
            self.own_ids.discard(hook.id)
        for key in [k for k in self._partner_hooks if k[0] == channel_id]:
            self.own_ids.discard(self._partner_hooks.pop(key).id)

    async def for_partner(
        self, channel: discord.TextChannel, partner_id: str, image: bytes
    ) -> discord.Webhook | None:
        """The partner's own webhook in this channel, its avatar ``image``; None when the
        channel has no room for another webhook (or the bot may not manage them)."""
        key = (channel.id, partner_id)
        wanted = f"{PARTNER_WEBHOOK_PREFIX}{partner_id}:{hashlib.sha256(image).hexdigest()[:12]}"
        hook = self._partner_hooks.get(key)
        if hook is not None and hook.name == wanted:
            return hook
        if time.monotonic() < self._fallback_until.get(channel.id, 0.0):
            return None
        async with self._locks.setdefault(channel.id, asyncio.Lock()):
            try:
                hook = await self._partner_hook(channel, partner_id, wanted, image)
            except discord.Forbidden:
                self._fallback_until[channel.id] = time.monotonic() + FORBIDDEN_RETRY_SECONDS
                return None
            if hook is not None:
                self._partner_hooks[key] = hook
                self.own_ids.add(hook.id)
            return hook

    async def _partner_hook(
        self, channel: discord.TextChannel, partner_id: str, wanted: str, image: bytes
    ) -> discord.Webhook | None:
        me = self._client.user
        hooks = await channel.webhooks()
        prefix = f"{PARTNER_WEBHOOK_PREFIX}{partner_id}:"
        for hook in hooks:
            ours = hook.user is not None and me is not None and hook.user.id == me.id
            if ours and hook.token and (hook.name or "").startswith(prefix):
                if hook.name != wanted:  # the picture changed since
                    hook = await hook.edit(name=wanted, avatar=image, reason="new avatar")
                return hook
        if len(hooks) >= MAX_CHANNEL_WEBHOOKS:
            logger.warning(
                "discord: #%s has %d webhooks; %s speaks without its picture there",
                channel.name,
                len(hooks),
                partner_id,
            )
            return None
        logger.info("discord: creating %s's webhook in #%s", partner_id, channel.name)
        return await channel.create_webhook(name=wanted, avatar=image, reason="partner avatar")


class Poster:
    """Posts one chunk where it belongs: a user's DM, a channel or a thread, as the partner
    (persona webhook) or as the bot (with the partner's name in front, and a reply reference).
    Raises discord.py's errors; the channel maps them."""

    def __init__(self, client: discord.Client, webhooks: PersonaWebhooks) -> None:
        self._client = client
        self._webhooks = webhooks
        self._dm_channels: dict[str, discord.DMChannel] = {}

    def remember_dm(self, user_id: str, channel: discord.DMChannel) -> None:
        self._dm_channels[user_id] = channel

    async def post(self, message: Outbound, file: discord.File | None = None) -> discord.Message:
        """One chunk (with ``file``: a voice reply's audio beside its text), its choices as
        buttons (``adapters/discord_buttons.py``)."""
        extra: dict[str, Any] = {"file": file} if file is not None else {}
        extra |= buttons(message.choices)
        if message.chat.is_dm:
            channel = await self.dm_channel(message.chat.chat_id)
            return await channel.send(message.text, allowed_mentions=NO_PINGS, **extra)
        target, parent = await self.group_target(message.chat)
        text = message.text
        if message.partner_name:
            # a persona webhook cannot carry buttons: a message with them goes as the bot
            hook = None if "view" in extra else await self._persona_hook(parent, message)
            if hook is not None and parent is not None:
                return await self._as_persona(hook, parent, message, extra)
            text = f"**{message.partner_name}:** {text}"
        reply_to = message.reply_to_message_id
        if reply_to and reply_to.isdigit():
            reference = discord.MessageReference(
                message_id=int(reply_to), channel_id=target.id, fail_if_not_exists=False
            )
            return await target.send(
                text, reference=reference, allowed_mentions=REPLY_PING, **extra
            )
        return await target.send(text, allowed_mentions=NO_PINGS, **extra)

    async def _persona_hook(
        self, parent: discord.TextChannel | None, message: Outbound
    ) -> discord.Webhook | None:
        """The partner's own webhook when it has a picture and no avatar URL, else the
        channel's shared one."""
        if parent is None:
            return None
        image = message.partner_avatar_image
        if image and message.partner_id and not avatar_url(message.partner_avatar):
            own = await self._webhooks.for_partner(parent, message.partner_id, image)
            if own is not None:
                return own
        return await self._webhooks.get(parent)

    async def messageable(self, chat: ChatRef) -> discord.abc.Messageable:
        """Where a chat's messages are (a user's DM, a channel, a thread)."""
        if chat.is_dm:
            return await self.dm_channel(chat.chat_id)
        target, _ = await self.group_target(chat)
        return target

    async def post_file(self, chat: ChatRef, caption: str, file: discord.File) -> discord.Message:
        """A document, sent as the bot (a persona does not hand out files)."""
        if chat.is_dm:
            return await (await self.dm_channel(chat.chat_id)).send(
                caption, file=file, allowed_mentions=NO_PINGS
            )
        target, _ = await self.group_target(chat)
        return await target.send(caption, file=file, allowed_mentions=NO_PINGS)

    async def _as_persona(
        self,
        hook: discord.Webhook,
        parent: discord.TextChannel,
        message: Outbound,
        extra: dict[str, Any] | None = None,
    ) -> discord.Message:
        """The partner's own name and avatar. Webhook messages cannot reference another
        message, so the reply stands on its own."""
        assert message.partner_name is not None
        options: dict[str, Any] = dict(extra or {})
        if message.chat.thread_id:
            options["thread"] = discord.Object(id=int(message.chat.thread_id))
        avatar = avatar_url(message.partner_avatar)
        if avatar:
            options["avatar_url"] = avatar
        try:
            return await hook.send(
                message.text,
                username=webhook_username(message.partner_name),
                allowed_mentions=NO_PINGS,
                wait=True,
                **options,
            )
        except discord.NotFound as exc:
            if exc.code != UNKNOWN_WEBHOOK:
                raise
            self._webhooks.forget(parent.id)  # someone deleted it: make a new one on retry
            raise DeliveryError("the persona webhook was deleted", retryable=True) from exc

    async def channel(self, channel_id: int) -> object:
        """A channel or thread, from discord.py's cache or else over REST."""
        cached = self._client.get_channel(channel_id)
        return cached if cached is not None else await self._client.fetch_channel(channel_id)

    async def group_target(self, chat: ChatRef) -> tuple[GroupTarget, discord.TextChannel | None]:
        """Where to post in a server chat, and the channel whose webhook speaks there
        (threads have no webhooks of their own)."""
        target = await self.channel(int(chat.thread_id or chat.chat_id))
        if isinstance(target, discord.Thread):
            parent = target.parent or await self.channel(target.parent_id)
            return target, parent if isinstance(parent, discord.TextChannel) else None
        if isinstance(target, discord.TextChannel):
            return target, target
        raise DeliveryError(f"{chat.key} is not a text channel or thread", retryable=False)

    async def dm_channel(self, user_id: str) -> discord.DMChannel:
        """A user's DM channel (the gateway addresses a DM by the user's id), cached."""
        channel = self._dm_channels.get(user_id)
        if channel is None:
            user = self._client.get_user(int(user_id)) or await self._client.fetch_user(
                int(user_id)
            )
            channel = user.dm_channel or await user.create_dm()
            self._dm_channels[user_id] = channel
        return channel

    async def typing(self, chat: ChatRef) -> None:
        """One typing trigger (awaiting discord.py's Typing sends one; it shows ~10 s)."""
        if chat.is_dm:
            await (await self.dm_channel(chat.chat_id)).typing()
        else:
            target, _ = await self.group_target(chat)
            await target.typing()
