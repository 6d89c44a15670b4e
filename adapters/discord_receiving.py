"""Receiving on Discord: gateway events, slash commands and button presses handed over, and
missed messages.

Messages become :class:`~bot.events.Inbound` (``adapters/discord_events.py``), handed to the
gateway one chat at a time in arrival order, one call each; the gateway stores each one
deduplicated by message id (and runs a command once per message id), so a repeated
MESSAGE_CREATE gets one reply. After every READY and RESUMED the recent history of each bound
channel (those of the gateway's last :class:`~bot.events.ChannelView`, and their active
threads) in a guild on this worker's shards is fetched once and fed through the same path:
messages younger than ``discord.missed_max_age_minutes`` are answered, older ones are handed
over as late (context only, never run as a command). With
assigned shards this happens per shard, when that shard is READY or RESUMED; and events of a
shard no longer assigned to this process are dropped (another process connects it now).

:class:`DiscordReceiving` is the part of :class:`~adapters.discord_channel.DiscordChannel`
that does this; the channel holds the state it reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import discord

from adapters import discord_media
from adapters.base import Receiver
from adapters.chat_locks import ChatLocks
from adapters.discord_commands import SlashCommands
from adapters.discord_delivery import PersonaWebhooks, Poster
from adapters.discord_events import PLATFORM, BotIdentity, chat_of, message_event
from adapters.discord_shards import ShardConnections
from bot.config.platforms import DiscordConfig
from bot.events import ChannelView, ChatRef, Reaction

logger = logging.getLogger(__name__)

MISSED_FETCH_LIMIT = 100
MISSED_LOOKBACK = timedelta(hours=24)
MISSED_OVERLAP = timedelta(minutes=1)
"""Fetch a little before the newest stored message: repeats are deduplicated, gaps are not."""


class DiscordReceiving:
    """Gateway events, slash commands and missed messages of the Discord channel."""

    config: DiscordConfig
    client: discord.Client
    webhooks: PersonaWebhooks
    poster: Poster
    receiver: Receiver | None
    view: ChannelView
    me: BotIdentity | None
    catch_ups: int
    commands: SlashCommands
    shard_connections: ShardConnections | None
    _to_catch_up: set[int]
    _connected: bool
    _background: set[asyncio.Task[None]]
    _chat_locks: ChatLocks

    def _register_events(self) -> None:
        client = self.client

        @client.event
        async def on_ready() -> None:
            self._connected = True
            if self.shard_connections is None:
                self._in_background(self._catch_up(), "discord catch-up after READY")

        @client.event
        async def on_resumed() -> None:
            self._connected = True
            if self.shard_connections is None:
                self._in_background(self._catch_up(), "discord catch-up after RESUMED")

        @client.event
        async def on_shard_connect(shard_id: int) -> None:
            self._shard_connected(shard_id)

        @client.event
        async def on_shard_ready(shard_id: int) -> None:
            del shard_id  # every shard whose READY came is caught up, see _shard_connected
            self._catch_up_shards(set(self._to_catch_up), "READY")
            self._to_catch_up.clear()

        @client.event
        async def on_shard_resumed(shard_id: int) -> None:
            self._shard_connected(shard_id, resumed=True)

        @client.event
        async def on_disconnect() -> None:
            self._connected = False

        @client.event
        async def on_message(message: discord.Message) -> None:
            await self.handle_message(message)

        @client.event
        async def on_raw_reaction_add(payload: discord.RawReactionActionEvent) -> None:
            await self.handle_reaction(payload)

        @client.event
        async def on_interaction(interaction: discord.Interaction) -> None:
            # slash commands come through the command tree (adapters/discord_commands.py)
            if interaction.type is discord.InteractionType.component and self.receiver:
                await self.commands.press(interaction, self.receiver)

    def _shard_connected(self, shard_id: int, *, resumed: bool = False) -> None:
        """An assigned shard's READY came, or it RESUMED. One no longer assigned (discord.py
        reconnected it by itself meanwhile) is closed again. A resumed one is caught up at
        once; after READY the catch-up waits for the shard's guilds, until the next
        ``shard_ready`` (discord.py may skip a shard's own when another's READY follows
        within the wait, so whichever comes catches up every shard waiting)."""
        shards = self.shard_connections
        if shards is None:
            return
        if not shards.holds(shard_id):
            shards.unassigned_up(shard_id)
        elif resumed:
            self._catch_up_shards({shard_id}, "RESUMED")
        else:
            self._to_catch_up.add(shard_id)

    def _catch_up_shards(self, shard_ids: set[int], how: str) -> None:
        shards = self.shard_connections
        held = {k for k in shard_ids if shards is not None and shards.holds(k)}
        if held:
            self._in_background(self._catch_up(held), f"discord catch-up after {how}")

    def _from_my_shard(self, guild_id: int | None) -> bool:
        """Whether an event of this guild (None: a DM, always on shard 0) came on a shard this
        process holds: with assigned shards, one let go may still deliver a last event."""
        shards = self.shard_connections
        if shards is None:
            return True
        count = self.client.shard_count or 1
        return shards.holds(0 if guild_id is None else (guild_id >> 22) % count)

    async def handle_reaction(self, payload: discord.RawReactionActionEvent) -> None:
        """A user's reaction, handed to the gateway as context (the per-event edge)."""
        if self.receiver is None or self.me is None or payload.user_id == self.me.user_id:
            return
        if not self._from_my_shard(payload.guild_id):
            return
        try:
            reaction = await self._reaction(payload)
            if reaction is not None:
                await self.receiver.receive(reaction)
        except Exception:
            logger.exception("discord: reaction on %s not handled", payload.message_id)

    async def _reaction(self, payload: discord.RawReactionActionEvent) -> Reaction | None:
        # A user discord.py has not seen is not looked up: a stranger's reaction must cost
        # no call to Discord, and the gateway names the people it serves as it stored them.
        user = payload.member or self.client.get_user(payload.user_id)
        if payload.guild_id is None:
            chat: ChatRef | None = ChatRef(PLATFORM, str(payload.user_id), "dm")
        elif user is None:
            return None  # Discord sends the member with every reaction in a server
        else:
            chat = chat_of(await self.poster.channel(payload.channel_id), user)
        return discord_media.reaction_event(payload, chat, user) if chat else None

    def _in_background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def handle_message(self, message: discord.Message, *, missed: bool = False) -> None:
        """Convert and hand over one message, in order within its chat. Never raises: one bad
        message must not stop the ones after it. ``missed``: fetched after a reconnect."""
        chat = chat_of(message.channel, message.author)
        if chat is None or self.receiver is None or self.me is None:
            return
        if not missed and not self._from_my_shard(message.guild.id if message.guild else None):
            return
        async with self._chat_locks.hold(chat.key):  # before any other await: keeps order
            try:
                await self._handle_message(message, chat, self.receiver, self.me, missed)
            except Exception:
                logger.exception("discord: message %s in %s not handled", message.id, chat.key)

    async def _handle_message(
        self,
        message: discord.Message,
        chat: ChatRef,
        receiver: Receiver,
        me: BotIdentity,
        missed: bool,
    ) -> None:
        late = missed and message.created_at < self._answer_cutoff()
        own = self.webhooks.own_ids
        event = message_event(message, me, own, answer_bots=self.config.answer_bots, late=late)
        if event is None:
            return
        if isinstance(message.channel, discord.DMChannel):
            self.poster.remember_dm(chat.chat_id, message.channel)
        await receiver.receive(event)

    def _answer_cutoff(self) -> datetime:
        return discord.utils.utcnow() - timedelta(minutes=self.config.missed_max_age_minutes)

    async def _catch_up(self, shard_ids: set[int] | None = None) -> None:
        """Fetch what bound channels (of these shards' guilds, or of all this process's) said
        while the gateway was away (once per connect; the per-connect edge: a failure is
        logged and the next connect tries again)."""
        try:
            if self.receiver is not None:
                await self._fetch_missed(self.receiver, shard_ids)
        except Exception:
            logger.exception("discord: missed messages not fetched")
        finally:
            self.catch_ups += 1

    async def _fetch_missed(self, receiver: Receiver, shard_ids: set[int] | None) -> None:
        for chat_id in self.view.bound_chats:
            try:
                await self._catch_up_channel(int(chat_id), receiver, shard_ids)
            except (discord.HTTPException, ValueError) as exc:
                logger.warning("discord: missed messages in %s not fetched: %s", chat_id, exc)

    async def _catch_up_channel(
        self, channel_id: int, receiver: Receiver, shard_ids: set[int] | None
    ) -> None:
        channel = await self.poster.channel(channel_id)
        if not isinstance(channel, discord.TextChannel) or self.client.user is None:
            return
        if not self._on_my_shards(channel.guild, shard_ids):
            return
        places: list[discord.TextChannel | discord.Thread] = [channel, *channel.threads]
        for place in places:
            chat = chat_of(place, self.client.user)
            if chat is None:
                continue
            last = await receiver.last_inbound_at(chat)
            now = discord.utils.utcnow()
            since = (
                datetime.fromtimestamp(last, UTC) - MISSED_OVERLAP
                if last is not None
                else now - timedelta(minutes=self.config.missed_max_age_minutes)
            )
            after = max(since, now - MISSED_LOOKBACK)
            # newest first, so a long absence keeps the most recent messages
            fetched = [
                m
                async for m in place.history(
                    limit=MISSED_FETCH_LIMIT, after=after, oldest_first=False
                )
            ]
            for message in reversed(fetched):
                await self.handle_message(message, missed=True)

    def _on_my_shards(self, guild: discord.Guild, shard_ids: set[int] | None) -> bool:
        """Whether this worker connects the shard Discord sends the guild's events to (one of
        these, when they are named): a guild on another worker's shards is that worker's to
        catch up."""
        if shard_ids is not None:
            return guild.shard_id in shard_ids
        client = self.client
        if not isinstance(client, discord.AutoShardedClient) or client.shard_ids is None:
            return True
        return guild.shard_id in client.shard_ids

    async def _on_command(self, interaction: discord.Interaction, text: str) -> None:
        if self.receiver is not None:
            await self.commands.run(interaction, text, self.receiver)
