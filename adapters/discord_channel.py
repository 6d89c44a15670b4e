"""The Discord channel: discord.py's gateway client and REST API, driven by the gateway.

* **Connection.** Intents: guilds, guild messages, DMs and message content (the last must be
  switched on in the Developer Portal, docs/discord.md). ``discord.api_base`` and
  ``discord.gateway_url`` point discord.py elsewhere (proxies, tests) before the client is
  built; ``discord.shards = "auto"`` runs an AutoShardedClient, a number of shards runs that
  many, and ``discord.shard_ids`` only those of them (one worker's part of the bot: Discord
  sends each guild's events to one shard, DMs to shard 0). discord.py reconnects and resumes
  by itself.
* **Assigned shards** (``shards_assigned``): the gateway says which shards to connect, and
  changes that while the client runs (:meth:`DiscordChannel.connect_shards`,
  ``adapters/discord_shards.py``); :meth:`DiscordChannel.start` then only logs in.
* **Receiving** (``adapters/discord_receiving.py``): messages, reactions and slash commands
  handed to the gateway one chat at a time; after every READY and RESUMED, the messages
  missed meanwhile.
* **Slash commands** (``adapters/discord_commands.py``) are synced once, by the worker that
  leads (:meth:`DiscordChannel.lead`; a lone worker leads from its start). An
  invocation is deferred at once and handed over as its command line; the gateway's answer to
  it goes back as the interaction's follow-up.
* **Sending** (``adapters/discord_delivery.py``): partners speak through persona webhooks in
  servers, replies reference the answered message, nothing can ping @everyone or roles.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Awaitable, Callable, Collection

import aiohttp
import discord

from adapters import discord_media
from adapters.base import DeliveryError, Receiver, ReplyStream
from adapters.chat_locks import ChatLocks
from adapters.chunking import split as split_markdown
from adapters.discord_buttons import buttons
from adapters.discord_client import apply_endpoints, assigned_client, build_client
from adapters.discord_commands import SlashCommands, build_tree
from adapters.discord_delivery import (
    CANNOT_MESSAGE_USER,
    MAX_MESSAGE_CHARS,
    NO_PINGS,
    PersonaWebhooks,
    Poster,
    delivery_error,
)
from adapters.discord_events import (
    PLATFORM,
    BotIdentity,
)
from adapters.discord_receiving import DiscordReceiving
from adapters.discord_shards import IDENTIFY_INTERVAL_SECONDS, ShardConnections, gateway_ended
from adapters.discord_streams import EditStream
from bot.config.model import ConfigError
from bot.config.platforms import DiscordConfig
from bot.events import ChannelView, ChatRef, Outbound

logger = logging.getLogger(__name__)

NAME_PREFIX_RESERVE = 70
"""Room kept in every chunk for the fallback "**Name:** " prefix (names are <= 60 chars)."""
CHUNK_CHARS = MAX_MESSAGE_CHARS - NAME_PREFIX_RESERVE
READY_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0


class DiscordChannel(DiscordReceiving):
    platform = PLATFORM
    refetches_messages = True  # the catch-up after a reconnect (adapters/discord_receiving.py)

    def __init__(
        self,
        config: DiscordConfig,
        *,
        guild_ready_timeout: float = 2.0,
        shards_assigned: bool = False,
        identify_interval: float = IDENTIFY_INTERVAL_SECONDS,
    ) -> None:
        """``shards_assigned``: connect only the shards :meth:`connect_shards` names (several
        workers divide the bot's ``discord.shards`` among them), not those of the config.
        ``identify_interval``: then, the least time between two IDENTIFYs of this process."""
        if config.token is None:
            raise ConfigError(
                "discord.token is not set; add the bot token from the Developer Portal"
            )
        self.config = config
        apply_endpoints(config)
        # Built now (no I/O): replies left over from a crash are re-delivered before the
        # channels start, so send() logs in on demand and works over REST alone.
        self.shard_connections: ShardConnections | None = None
        if shards_assigned:
            client = assigned_client(config, guild_ready_timeout, identify_interval)
            self.shard_connections = ShardConnections(client)
            self.client: discord.Client = client
        else:
            self.client = build_client(config, guild_ready_timeout)
        self.webhooks = PersonaWebhooks(self.client, self._missing_webhook_permission)
        self.poster = Poster(self.client, self.webhooks)
        self.receiver: Receiver | None = None
        self.view = ChannelView()
        """What the gateway last told this channel (bound chats, the partners to offer)."""
        self.me: BotIdentity | None = None
        self.unreachable_users: set[str] = set()
        """Users Discord will not let the bot message (code 50007); check-ins skip them."""
        self.catch_ups = 0
        self._to_catch_up: set[int] = set()
        """Assigned shards whose READY came and whose catch-up waits for their guilds."""
        """Finished fetches of missed messages (one per READY or RESUMED)."""
        self._connected = False
        self._logged_in = False
        self._login_lock = asyncio.Lock()
        self._connect_task: asyncio.Task[None] | None = None
        self._tree: discord.app_commands.CommandTree[discord.Client] | None = None
        self._synced = False
        self._background: set[asyncio.Task[None]] = set()
        self._chat_locks = ChatLocks()
        self.commands = SlashCommands(self._chat_locks)
        self._register_events()

    @property
    def connected(self) -> bool:
        """Logged in and every shard this process connects is up (an assigned worker that
        holds no shard is connected: it sends, and stands by)."""
        shards = self.shard_connections
        if shards is None:
            return self._connected and not self.client.is_closed()
        return self._logged_in and not self.client.is_closed() and shards.assigned <= {*shards.up}

    # ---- assigned shards (bot/workers/shards.py decides) ---------------------------------------

    @property
    def assigned_shards(self) -> int | None:
        """How many shards the bot has when the gateway assigns them; None otherwise."""
        if self.shard_connections is None:
            return None
        return self.shard_connections.client.shard_count

    @property
    def connected_shards(self) -> list[int]:
        """The shards whose gateway connection is up now."""
        client = self.client
        if not isinstance(client, discord.AutoShardedClient):
            return [0] if self.connected else []
        return sorted(k for k, shard in client.shards.items() if not shard.is_closed())

    async def connect_shards(self, shard_ids: Collection[int]) -> None:
        """Connect exactly these shards from now on: when this returns, the others are
        closed and nothing they receive is handed over any more; these are connected or
        connecting. Only with ``shards_assigned``."""
        if self.shard_connections is None:
            raise RuntimeError("connect_shards needs a channel built with shards_assigned")
        await self.shard_connections.connect(shard_ids)

    # ---- lifecycle -------------------------------------------------------------------

    def set_view(self, view: ChannelView) -> None:
        self.view = view

    async def start(self, receiver: Receiver) -> None:
        self.receiver = receiver
        await self._login()
        user = self.client.user
        assert user is not None  # set by login
        self.me = BotIdentity(user.id, self.client.application_id)
        receiver.note_bot_identity(PLATFORM, user.name, None)
        if self._tree is None:
            self._tree = build_tree(self.client, self.view.partners, self._on_command)
        if self.shard_connections is not None:
            logger.info("discord: %s logged in; it connects the shards assigned to it", user.name)
            return
        self._connect_task = asyncio.create_task(self.client.connect(), name="discord gateway")
        await self._wait_ready(self._connect_task)
        logger.info("discord: %s connected%s", user.name, self._shards_connected())

    def _shards_connected(self) -> str:
        """Which shards this worker connected, for the log: " (shards 0, 1 of 4)"; nothing
        when the client does not shard."""
        client = self.client
        if not isinstance(client, discord.AutoShardedClient):
            return ""
        shards = sorted(client.shards)
        label = "shard" if len(shards) == 1 else "shards"
        return f" ({label} {', '.join(map(str, shards))} of {client.shard_count})"

    async def _login(self) -> None:
        async with self._login_lock:
            if self._logged_in:
                return
            assert self.config.token is not None
            try:
                await self.client.login(self.config.token.get_secret_value())
            except discord.LoginFailure:
                raise ConfigError(
                    "discord.token was rejected by Discord; copy the bot token again from the "
                    "Developer Portal (Bot -> Reset Token)"
                ) from None
            except (aiohttp.ClientError, discord.HTTPException) as exc:
                where = self.config.api_base or "discord.com"
                raise ConfigError(
                    f"cannot reach the Discord API at {where} ({exc}); check the network, or "
                    "discord.api_base if you use a proxy"
                ) from None
            self._logged_in = True

    async def lead(self) -> None:
        """The leader syncs the slash commands, once per process: Discord rate-limits
        command registration, so the other workers leave it alone."""
        if self._tree is not None and not self._synced:
            self._synced = True
            await self._sync_commands(self._tree)

    async def follow(self) -> None:
        """Nothing to put down: every worker keeps its own gateway connection."""

    async def _sync_commands(self, tree: discord.app_commands.CommandTree[discord.Client]) -> None:
        try:
            await tree.sync()
        except discord.HTTPException as exc:
            logger.warning("discord: slash commands not registered (%s); typed ones work", exc)

    async def _wait_ready(self, connect: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self.client.wait_until_ready())
        done, _ = await asyncio.wait(
            {connect, ready}, timeout=READY_TIMEOUT_SECONDS, return_when=asyncio.FIRST_COMPLETED
        )
        if ready in done:
            return
        ready.cancel()
        if connect not in done:
            raise ConfigError(
                f"no connection to the Discord gateway within {READY_TIMEOUT_SECONDS:.0f} s; "
                "check the network, or discord.gateway_url if you use a proxy"
            )
        error = connect.exception()
        raise ConfigError(gateway_ended(error)) from None

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._connected = False
        if self.shard_connections is not None:
            await self.shard_connections.stop()
            self._connect_task = self.shard_connections.running
        if not self.client.is_closed():
            await self.client.close()
        connect, self._connect_task = self._connect_task, None
        if connect is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(connect, return_exceptions=True), STOP_TIMEOUT_SECONDS
                )

    # ---- sending ---------------------------------------------------------------------

    def split(self, text: str) -> list[str]:
        return split_markdown(text, CHUNK_CHARS) or [text]

    async def send(self, message: Outbound) -> str | None:
        async def post() -> discord.Message:
            pending = self.commands.answering(message)
            if pending is None:
                return await self.poster.post(message)
            pending.answered = True
            return await pending.interaction.followup.send(
                message.text,
                ephemeral=pending.ephemeral,
                allowed_mentions=NO_PINGS,
                wait=True,
                **buttons(message.choices),
            )

        return await self._delivering(message.chat, post)

    async def send_file(
        self, chat: ChatRef, filename: str, data: bytes, caption: str
    ) -> str | None:
        """A document (an export): as the answer to a pending slash command, else as the bot."""

        async def post() -> discord.Message:
            file = discord.File(io.BytesIO(data), filename=filename)
            text = caption[:MAX_MESSAGE_CHARS]
            pending = self.commands.pending(chat)
            if pending is None:
                return await self.poster.post_file(chat, text, file)
            pending.answered = True
            return await pending.interaction.followup.send(
                text, file=file, ephemeral=pending.ephemeral, allowed_mentions=NO_PINGS, wait=True
            )

        return await self._delivering(chat, post)

    async def _delivering(
        self, chat: ChatRef, post: Callable[[], Awaitable[discord.Message]]
    ) -> str:
        """Log in if needed, post, and turn discord.py's errors into DeliveryError."""
        try:
            await self._login()
            sent = await post()
        except DeliveryError:
            raise
        except discord.Forbidden as exc:
            if exc.code == CANNOT_MESSAGE_USER and chat.is_dm:
                self.unreachable_users.add(chat.chat_id)
            raise delivery_error(exc) from exc
        except (
            discord.HTTPException,
            discord.RateLimited,
            aiohttp.ClientError,
            TimeoutError,
        ) as exc:
            raise delivery_error(exc) from exc
        return str(sent.id)

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        del partner_id  # the bot types; the persona speaks through a webhook, which cannot
        try:
            await self._login()
            await self.poster.typing(chat)
        except (discord.HTTPException, aiohttp.ClientError, TimeoutError) as exc:
            raise delivery_error(exc) from exc

    # ---- media (adapters/discord_media.py) ---------------------------------------------

    caption_limit = MAX_MESSAGE_CHARS
    max_download_bytes = discord_media.MAX_DOWNLOAD_BYTES

    async def download(self, ref: str) -> bytes:
        try:
            return await discord_media.download(ref)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise delivery_error(exc) from exc

    async def send_voice(self, message: Outbound, audio: bytes) -> str | None:
        async def post() -> discord.Message:
            return await self.poster.post(message, discord_media.voice_file(audio))

        return await self._delivering(message.chat, post)

    async def react(
        self, chat: ChatRef, message_id: str, emoji: str, partner_id: str | None = None
    ) -> None:
        del partner_id  # a webhook cannot react: the bot does

        async def post() -> discord.Message:
            place = await self.poster.messageable(chat)
            message = place.get_partial_message(int(message_id))  # type: ignore[attr-defined]
            await message.add_reaction(emoji)
            return message

        await self._delivering(chat, post)

    async def send_sticker(
        self, chat: ChatRef, sticker: str, partner_id: str | None = None
    ) -> str | None:
        del partner_id  # the bot sends it

        async def post() -> discord.Message:
            place = await self.poster.messageable(chat)
            # any object with the sticker's id will do: discord.py sends only the ids
            ids = [discord.Object(id=int(sticker))]
            return await place.send(stickers=ids)  # type: ignore[arg-type]

        return await self._delivering(chat, post)

    async def recording(self, chat: ChatRef, partner_id: str | None = None) -> None:
        await self.typing(chat, partner_id)

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> ReplyStream | None:
        """DMs only: in servers the reply speaks through a persona webhook whose name and
        avatar a preview, started before the reply exists, could not carry."""
        del reply_to, partner_id  # DM replies quote nothing and speak as the bot
        if not self.config.stream or not chat.is_dm:
            return None

        async def post(text: str) -> discord.Message:
            channel = await self.poster.dm_channel(chat.chat_id)
            return await channel.send(text, allowed_mentions=NO_PINGS)

        return EditStream(post)

    # ---- owner notices ---------------------------------------------------------------

    async def _missing_webhook_permission(self, channel: discord.TextChannel) -> None:
        if self.receiver is None:
            return
        await self.receiver.notify_owner(
            PLATFORM,
            f"I may not manage webhooks in #{channel.name} ({channel.guild.name}), so partners "
            "there speak as the bot, with their name in front of each message. To give each "
            "partner its own name and avatar, grant me the Manage Webhooks permission in that "
            "channel.",
        )
