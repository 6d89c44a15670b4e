"""A fake Discord REST API and gateway for offline tests with the real discord.py client.

One aiohttp application serves the REST API under ``/api/v10``, the gateway websocket under
``/gateway`` (and ``/resume-gateway``, the ``resume_gateway_url`` sent in READY) and uploaded or
injected attachments under ``/cdn``. It listens on 127.0.0.1 on a random port and is started in
the test's own event loop::

    async with FakeDiscord() as fake:
        fake.add_guild(10, "Guild")
        fake.add_text_channel(10, 20, "general")
        restore = point_discord_at(fake)  # before the client is created
        try:
            client = discord.Client(intents=intents, guild_ready_timeout=0.05)
            await client.login(BOT_TOKEN)
            task = asyncio.create_task(client.connect())
            await client.wait_until_ready()
            await fake.message_create(channel_id=20, author_id=5, content="hi")
            call = await fake.wait_for_rest(lambda c: c.method == "POST")
        finally:
            await client.close()
            restore()

The fake keeps a small world (guilds, text channels, threads, users, DM channels, webhooks,
message history, application commands, interactions), records every REST call, every IDENTIFY
and RESUME, injects gateway events and REST failures, and holds REST requests unanswered.

Discord behaviour it reproduces on purpose, so adapters meet it in tests:

- Messages the bot sends (channel messages, its webhooks' messages, non-ephemeral interaction
  responses) come back over the gateway as MESSAGE_CREATE / MESSAGE_UPDATE / MESSAGE_DELETE,
  like on Discord (``echo_own_messages=False`` turns this off).
- Sharding: a session gets the guilds and guild events of its shard only, by Discord's rule
  ``shard_id = (guild_id >> 22) % num_shards`` (IDENTIFY's ``shard``), and DMs only on shard 0;
  a shard id outside ``0..num_shards-1`` is closed with 4010. ``GET /gateway/bot`` recommends
  ``recommended_shards`` (1 unless a test sets it). Two live connections on one shard both get
  its events, as on Discord; each IDENTIFY or RESUME that makes a second one is recorded in
  ``shard_overlaps`` (a bot divided among workers must never cause one).
- Gateway events are filtered by the intents sent in IDENTIFY: guild messages need
  GUILD_MESSAGES, DMs need DIRECT_MESSAGES. Without MESSAGE_CONTENT, guild messages arrive with
  empty content/embeds/attachments/components unless they mention the bot or were sent by it.
  Without GUILD_MEMBERS, GUILD_CREATE lists only the bot as member.
- Message payloads are validated: more than 2000 characters, more than 10 embeds -> 400 code
  50035; empty messages -> 400 code 50006; replies to unknown messages -> 400 code 50035 unless
  ``fail_if_not_exists`` is false. Webhook usernames containing "discord" or "clyde" or longer
  than 80 characters -> 400 code 50035. At most 15 webhooks per channel (400 code 30007).
- Interactions must be answered within ``interaction_deadline`` seconds (3 s like Discord) and
  only once (404 code 10062, 400 code 40060); followups before the response get 404 code 10015.
- Reactions: the bot may add a Unicode emoji or a custom one of a known guild (else 400 code
  10014 "Unknown Emoji"); :meth:`FakeDiscord.reaction_add` dispatches a user's
  MESSAGE_REACTION_ADD (needs the reactions intents). Attachments may carry the voice-message
  fields (``duration_secs``, ``waveform``) with the message flag ``FLAG_VOICE_MESSAGE``.
- A 429 carries ``retry_after`` in its JSON body and a ``Via`` header; discord.py retries only
  then. 500/502/504 are retried by discord.py after sleeping 1 s, 3 s, ...
- A session ends when its client closes the websocket with 1000/1001; any other close keeps it
  resumable and events dispatched meanwhile are replayed on RESUME. discord.py's
  ``Client.close()`` usually closes with 4000 (its receive loop is interrupted first).

Notes for tests: discord.py sleeps 5 s before every non-initial IDENTIFY (after an
INVALID_SESSION); override ``Client.before_identify_hook`` in tests that re-identify.
``interaction_deadline=None`` disables the 3 s answer deadline.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import json
import logging
import math
import mimetypes
import re
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import WSMsgType, web

__all__ = [
    "ADMINISTRATOR",
    "FLAG_VOICE_MESSAGE",
    "ALL_PERMISSIONS",
    "BOT_TOKEN",
    "INTENT_DIRECT_MESSAGES",
    "INTENT_DIRECT_MESSAGE_REACTIONS",
    "INTENT_GUILDS",
    "INTENT_GUILD_MEMBERS",
    "INTENT_GUILD_MESSAGES",
    "INTENT_GUILD_MESSAGE_REACTIONS",
    "INTENT_GUILD_PRESENCES",
    "INTENT_MESSAGE_CONTENT",
    "MANAGE_WEBHOOKS",
    "PRIVILEGED_INTENTS",
    "FakeDiscord",
    "Hold",
    "RestCall",
    "point_discord_at",
]

_log = logging.getLogger(__name__)

BOT_TOKEN = "fake-discord-token"
API_VERSION = 10
DISCORD_EPOCH_MS = 1_420_070_400_000
HEARTBEAT_INTERVAL_MS = 41_250
ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
MESSAGE_CONTENT_LIMIT = 2000
MAX_EMBEDS = 10
MAX_WEBHOOKS_PER_CHANNEL = 15

# Permission bits (Discord's values; ALL_PERMISSIONS equals discord.Permissions.all().value).
ALL_PERMISSIONS = 8_866_461_766_385_663
ADMINISTRATOR = 1 << 3
MANAGE_WEBHOOKS = 1 << 29

# Gateway intents.
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1
INTENT_GUILD_PRESENCES = 1 << 8
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_GUILD_MESSAGE_REACTIONS = 1 << 10
INTENT_GUILD_MESSAGE_TYPING = 1 << 11
INTENT_DIRECT_MESSAGES = 1 << 12
INTENT_DIRECT_MESSAGE_REACTIONS = 1 << 13
INTENT_DIRECT_MESSAGE_TYPING = 1 << 14
INTENT_MESSAGE_CONTENT = 1 << 15
PRIVILEGED_INTENTS = INTENT_GUILD_MEMBERS | INTENT_GUILD_PRESENCES | INTENT_MESSAGE_CONTENT
# Application flags (GET /oauth2/applications/@me) for the privileged intents switched on.
APP_FLAG_GATEWAY_PRESENCE_LIMITED = 1 << 13
APP_FLAG_GATEWAY_GUILD_MEMBERS_LIMITED = 1 << 15
APP_FLAG_GATEWAY_MESSAGE_CONTENT_LIMITED = 1 << 19

# Gateway opcodes.
OP_DISPATCH = 0
OP_HEARTBEAT = 1
OP_IDENTIFY = 2
OP_PRESENCE_UPDATE = 3
OP_VOICE_STATE_UPDATE = 4
OP_RESUME = 6
OP_RECONNECT = 7
OP_REQUEST_GUILD_MEMBERS = 8
OP_INVALID_SESSION = 9
OP_HELLO = 10
OP_HEARTBEAT_ACK = 11

# Channel types.
CHANNEL_TEXT = 0
CHANNEL_DM = 1
CHANNEL_PUBLIC_THREAD = 11

# Message types and flags.
MESSAGE_DEFAULT = 0
MESSAGE_REPLY = 19
MESSAGE_CHAT_INPUT_COMMAND = 20
FLAG_EPHEMERAL = 1 << 6
FLAG_LOADING = 1 << 7
FLAG_VOICE_MESSAGE = 1 << 13

# Interaction types, component types and callback types.
INTERACTION_COMMAND = 2
INTERACTION_COMPONENT = 3
COMPONENT_ACTION_ROW = 1
COMPONENT_BUTTON = 2
CALLBACK_MESSAGE = 4
CALLBACK_DEFERRED_MESSAGE = 5
CALLBACK_DEFERRED_UPDATE = 6
CALLBACK_UPDATE_MESSAGE = 7
MAX_ACTION_ROWS = 5
MAX_ROW_BUTTONS = 5
MAX_CUSTOM_ID_CHARS = 100
MAX_BUTTON_LABEL_CHARS = 80

# Events filtered by intents: event -> (intent for guild events, intent for DM events).
_EVENT_INTENTS: dict[str, tuple[int, int]] = {
    "MESSAGE_CREATE": (INTENT_GUILD_MESSAGES, INTENT_DIRECT_MESSAGES),
    "MESSAGE_UPDATE": (INTENT_GUILD_MESSAGES, INTENT_DIRECT_MESSAGES),
    "MESSAGE_DELETE": (INTENT_GUILD_MESSAGES, INTENT_DIRECT_MESSAGES),
    "MESSAGE_REACTION_ADD": (INTENT_GUILD_MESSAGE_REACTIONS, INTENT_DIRECT_MESSAGE_REACTIONS),
    "MESSAGE_REACTION_REMOVE": (INTENT_GUILD_MESSAGE_REACTIONS, INTENT_DIRECT_MESSAGE_REACTIONS),
    "TYPING_START": (INTENT_GUILD_MESSAGE_TYPING, INTENT_DIRECT_MESSAGE_TYPING),
    "GUILD_MEMBER_ADD": (INTENT_GUILD_MEMBERS, INTENT_GUILD_MEMBERS),
    "GUILD_MEMBER_UPDATE": (INTENT_GUILD_MEMBERS, INTENT_GUILD_MEMBERS),
    "GUILD_MEMBER_REMOVE": (INTENT_GUILD_MEMBERS, INTENT_GUILD_MEMBERS),
    "CHANNEL_CREATE": (INTENT_GUILDS, INTENT_GUILDS),
    "CHANNEL_UPDATE": (INTENT_GUILDS, INTENT_GUILDS),
    "CHANNEL_DELETE": (INTENT_GUILDS, INTENT_GUILDS),
    "THREAD_CREATE": (INTENT_GUILDS, INTENT_GUILDS),
    "THREAD_UPDATE": (INTENT_GUILDS, INTENT_GUILDS),
    "THREAD_DELETE": (INTENT_GUILDS, INTENT_GUILDS),
    "GUILD_ROLE_UPDATE": (INTENT_GUILDS, INTENT_GUILDS),
}
_CONTENT_EVENTS = frozenset({"MESSAGE_CREATE", "MESSAGE_UPDATE"})
_MENTION_RE = re.compile(r"<@!?(\d+)>")
_COMMAND_NAME_RE = re.compile(r"^[-_\w]{1,32}$")
_FORBIDDEN_WEBHOOK_NAMES = ("discord", "clyde")

T = TypeVar("T")
JSON = Any
_Handler = Callable[["RestCall", dict[str, str]], Awaitable[tuple[int, JSON]]]


@dataclass
class RestCall:
    """One REST request the fake received (recorded after its answer was decided)."""

    method: str
    path: str  # below the API base, e.g. "/channels/20/messages" (decoded, no query)
    json: Any  # parsed JSON body, or the parsed ``payload_json`` of a multipart body, or None
    files: list[tuple[str, bytes]]  # (filename, content) of multipart file parts
    headers: dict[str, str]
    time: float  # time.monotonic() when the request arrived
    query: dict[str, str] = field(default_factory=dict)
    status: int = 0  # status the fake answered with
    response: Any = None  # body the fake answered with (None for 204)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> str | None:
        """A request header, looked up case-insensitively."""
        wanted = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == wanted), None)


class ApiError(Exception):
    """An error answer in Discord's format."""

    def __init__(
        self, status: int, code: int, message: str, errors: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors is not None:
            body["errors"] = self.errors
        return body


def _form_error(field_name: str, code: str, message: str) -> ApiError:
    return ApiError(
        400,
        50035,
        "Invalid Form Body",
        {field_name: {"_errors": [{"code": code, "message": message}]}},
    )


@dataclass
class _Failure:
    method: str
    path_prefix: str
    status: int
    retry_after: float
    remaining: int
    via_header: bool
    is_global: bool
    body: dict[str, Any] | None


@dataclass(eq=False)
class Hold:
    """A REST request :meth:`FakeDiscord.hold_next` keeps unanswered, before it takes effect,
    until :meth:`release`. A client that goes away meanwhile cancels it: nothing happened."""

    method: str
    path_prefix: str
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    call: RestCall | None = None

    def release(self) -> None:
        self.released.set()


@dataclass(eq=False)
class _Connection:
    ws: web.WebSocketResponse
    path: str
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: _Session | None = None
    closed_by_server: bool = False

    async def send(self, frame: dict[str, Any]) -> bool:
        if self.ws.closed:
            return False
        async with self.send_lock:
            try:
                await self.ws.send_str(json.dumps(frame))
            except (ConnectionError, RuntimeError):
                return False
        return True


@dataclass(eq=False)
class _Session:
    session_id: str
    intents: int
    shard: list[int]
    conn: _Connection | None = None
    seq: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ended: bool = False


@dataclass(eq=False)
class _Interaction:
    id: int
    token: str
    payload: dict[str, Any]
    created: float
    channel_id: int
    guild_id: int | None
    callback_type: int | None = None
    original: dict[str, Any] | None = None
    followups: dict[int, dict[str, Any]] = field(default_factory=dict)


def _iso(dt: datetime | None = None) -> str:
    return (dt or datetime.now(UTC)).isoformat()


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _sid(value: int | None) -> str | None:
    return None if value is None else str(value)


def _is_unicode_emoji(text: str) -> bool:
    """Roughly what Discord takes as a Unicode emoji: a short run of pictographs, joiners,
    variation selectors and skin tones; letters, digits and punctuation are not."""
    if not text or len(text) > 12:
        return False
    joiners = {"\u200d", "\ufe0f", "\u20e3"}
    return all(ord(c) >= 0x2190 or c in joiners for c in text)


def _fake_hash(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def shard_of(guild_id: int | None, shard_count: int) -> int:
    """The shard Discord sends a guild's events to; DMs (no guild) go to shard 0."""
    return 0 if guild_id is None else (guild_id >> 22) % shard_count


def point_discord_at(fake: FakeDiscord) -> Callable[[], None]:
    """Point discord.py's REST base and default gateway at ``fake``; return a restore function.

    Must run before the ``discord.Client`` is created (discord.py builds each route's URL from
    ``Route.BASE`` when the request is made and the gateway URL when it connects).
    """
    import discord.gateway
    import discord.http
    import yarl

    old_base = discord.http.Route.BASE
    old_gateway = discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = fake.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)

    def restore() -> None:
        discord.http.Route.BASE = old_base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = old_gateway

    return restore


class FakeDiscord:
    """Fake Discord REST API + gateway on one aiohttp app (see the module docstring)."""

    def __init__(
        self,
        *,
        bot_id: int = 900,
        bot_name: str = "companion",
        application_id: int = 901,
        manage_webhooks: bool = True,
        token: str = BOT_TOKEN,
        owner_id: int = 1,
        echo_own_messages: bool = True,
        interaction_deadline: float | None = 3.0,
        allowed_privileged_intents: int = PRIVILEGED_INTENTS,
    ) -> None:
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.application_id = application_id
        self.manage_webhooks = manage_webhooks
        self.token = token
        self.owner_id = owner_id
        self.echo_own_messages = echo_own_messages
        self.interaction_deadline = interaction_deadline
        self.allowed_privileged_intents = allowed_privileged_intents
        self.recommended_shards = 1
        """The shard count ``GET /gateway/bot`` recommends (AutoShardedClient without one)."""

        self.api_base = ""
        self.gateway_url = ""
        self.resume_gateway_url = ""
        self.cdn_base = ""
        self.port = 0

        # Records.
        self.rest_calls: list[RestCall] = []
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.gateway_received: list[dict[str, Any]] = []  # client frames except heartbeats
        self.gateway_connections: list[str] = []  # path of every websocket connection
        self.heartbeats = 0
        self.resumed_count = 0  # successful RESUMEs answered with RESUMED
        self.shard_overlaps: list[list[int]] = []
        """The ``[shard_id, num_shards]`` of each IDENTIFY or RESUME made while another live
        connection already served that shard."""
        # Registered application commands: key None = global, else the guild id.
        self.commands: dict[int | None, list[dict[str, Any]]] = {}

        # World.
        self._last_snowflake = 0
        self._users: dict[int, dict[str, Any]] = {}
        self._joined: dict[int, str] = {}
        self._guilds: dict[int, dict[str, Any]] = {}
        self._channels: dict[int, dict[str, Any]] = {}
        self._dm_by_user: dict[int, int] = {}
        self._history: dict[int, list[dict[str, Any]]] = {}
        self._webhooks: dict[int, dict[str, Any]] = {}
        self.webhook_avatars: dict[int, bytes] = {}
        """Webhook id -> the avatar image it was created or last edited with."""
        self._interactions: dict[int, _Interaction] = {}
        self._cdn: dict[str, tuple[bytes, str]] = {}
        self.cdn_downloads: list[str] = []
        """Attachment paths fetched from the fake CDN, in order."""

        # Machinery.
        self._failures: list[_Failure] = []
        self._holds: list[Hold] = []
        self._sessions: dict[str, _Session] = {}
        self._connections: set[_Connection] = set()
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._routes = self._build_routes()

        self._users[bot_id] = self._new_user(bot_id, bot_name, bot=True)
        self._joined[bot_id] = _iso()
        self.add_user(owner_id, "owner")

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("GET", "/gateway", self._gateway_handler)
        app.router.add_route("GET", "/resume-gateway", self._gateway_handler)
        app.router.add_route("GET", "/cdn/{tail:.*}", self._cdn_handler)
        app.router.add_route("*", f"/api/v{API_VERSION}/{{tail:.*}}", self._rest_handler)
        app.router.add_route("*", "/{tail:.*}", self._not_found_handler)
        runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        root = f"127.0.0.1:{self.port}"
        self.api_base = f"http://{root}/api/v{API_VERSION}"
        self.gateway_url = f"ws://{root}/gateway"
        self.resume_gateway_url = f"ws://{root}/resume-gateway"
        self.cdn_base = f"http://{root}/cdn"

    async def close(self) -> None:
        for hold in self._holds:
            hold.release()
        for conn in list(self._connections):
            conn.closed_by_server = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.ws.close(code=1001, message=b"shutting down"), 1.0)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ world state

    def add_guild(self, guild_id: int, name: str = "Guild", *, owner_id: int = 1) -> None:
        if owner_id not in self._users:
            self.add_user(owner_id, f"user{owner_id}")
        self._guilds[guild_id] = {
            "id": guild_id,
            "name": name,
            "owner_id": owner_id,
            "joined_at": _iso(),
            "channels": [],
            "threads": [],
        }

    def add_text_channel(self, guild_id: int, channel_id: int, name: str = "general") -> None:
        guild = self._require_guild_world(guild_id)
        self._channels[channel_id] = {
            "id": str(channel_id),
            "type": CHANNEL_TEXT,
            "guild_id": str(guild_id),
            "name": name,
            "position": len(guild["channels"]),
            "permission_overwrites": [],
            "topic": None,
            "nsfw": False,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "parent_id": None,
            "flags": 0,
            "default_auto_archive_duration": 1440,
        }
        guild["channels"].append(channel_id)
        self._history.setdefault(channel_id, [])

    def add_thread(
        self, guild_id: int, parent_id: int, thread_id: int, name: str = "thread"
    ) -> None:
        guild = self._require_guild_world(guild_id)
        parent = self._channels.get(parent_id)
        if parent is None or parent.get("guild_id") != str(guild_id):
            raise KeyError(f"parent channel {parent_id} is not a channel of guild {guild_id}")
        now = _iso()
        self._channels[thread_id] = {
            "id": str(thread_id),
            "type": CHANNEL_PUBLIC_THREAD,
            "guild_id": str(guild_id),
            "parent_id": str(parent_id),
            "owner_id": str(self.owner_id),
            "name": name,
            "last_message_id": None,
            "message_count": 0,
            "total_message_sent": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": now,
                "locked": False,
                "create_timestamp": now,
            },
        }
        guild["threads"].append(thread_id)
        self._history.setdefault(thread_id, [])

    def add_user(self, user_id: int, name: str, *, bot: bool = False) -> dict[str, Any]:
        """Register a user; every known user is a member of every guild. Returns the user."""
        self._users[user_id] = self._new_user(user_id, name, bot=bot)
        self._joined.setdefault(user_id, _iso())
        return copy.deepcopy(self._users[user_id])

    def add_webhook(
        self, channel_id: int, name: str = "other hook", *, owner_user_id: int | None = None
    ) -> dict[str, Any]:
        """Add a webhook that the bot did not create (owned by another user, no application)."""
        channel = self._require_channel(channel_id)
        user_id = owner_user_id if owner_user_id is not None else self.owner_id
        return copy.deepcopy(
            self._create_webhook(channel, name, None, application_id=None, user_id=user_id)
        )

    async def set_manage_webhooks(self, value: bool) -> None:
        """Change the Manage Webhooks permission and tell connected clients (GUILD_ROLE_UPDATE)."""
        self.manage_webhooks = value
        for guild_id in self._guilds:
            await self._broadcast(
                "GUILD_ROLE_UPDATE",
                {"guild_id": str(guild_id), "role": self._everyone_role(guild_id)},
                require_session=False,
            )

    async def announce_channel(self, channel_id: int) -> None:
        """Send CHANNEL_CREATE (or THREAD_CREATE) for a channel added after the client connected."""
        channel = self._require_channel(channel_id)
        event = "THREAD_CREATE" if channel["type"] == CHANNEL_PUBLIC_THREAD else "CHANNEL_CREATE"
        payload = copy.deepcopy(channel)
        if event == "THREAD_CREATE":
            payload["newly_created"] = True
        await self.dispatch(event, payload)

    async def announce_guild(self, guild_id: int) -> None:
        """Send GUILD_CREATE for a guild added after the client connected (the bot joins it)."""
        self._require_guild_world(guild_id)
        await self._broadcast_guild_create(guild_id)

    def user_payload(self, user_id: int) -> dict[str, Any]:
        return copy.deepcopy(self._require_user(user_id))

    def channel_payload(self, channel_id: int) -> dict[str, Any]:
        return copy.deepcopy(self._require_channel(channel_id))

    def guild_payload(
        self, guild_id: int, *, intents: int = INTENT_GUILD_MEMBERS
    ) -> dict[str, Any]:
        """The GUILD_CREATE payload the fake sends for ``guild_id``."""
        return self._guild_create_payload(guild_id, intents)

    def messages_in(self, channel_id: int) -> list[dict[str, Any]]:
        """Message history of a channel, oldest first (deep copies)."""
        return copy.deepcopy(self._sorted_history(channel_id))

    def webhooks(self, channel_id: int | None = None) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(w)
            for w in self._webhooks.values()
            if channel_id is None or w["channel_id"] == str(channel_id)
        ]

    def dm_channel_id(self, user_id: int) -> int:
        """The DM channel id for ``user_id`` (created on first use)."""
        return int(self._dm_channel(user_id)["id"])

    # ------------------------------------------------------------------ gateway state

    @property
    def connected(self) -> bool:
        """True if at least one identified session has a live websocket."""
        return any(s.conn is not None and not s.ended for s in self._sessions.values())

    def serving(self, shard: list[int]) -> int:
        """How many live connections serve ``[shard_id, num_shards]`` now."""
        return sum(1 for session in self._sessions.values() if self._serves(session, shard))

    @staticmethod
    def _serves(session: _Session, shard: list[int]) -> bool:
        conn = session.conn
        return (
            session.shard == shard and not session.ended and conn is not None and not conn.ws.closed
        )

    def _note_overlap(self, shard: list[int], joining: _Session | None) -> None:
        others = [s for s in self._sessions.values() if s is not joining and self._serves(s, shard)]
        if others:
            self.shard_overlaps.append(list(shard))

    @property
    def session_ids(self) -> list[str]:
        return [s.session_id for s in self._sessions.values() if not s.ended]

    # ------------------------------------------------------------------ events

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH to every gateway session (filtered by its intents).

        Raises RuntimeError if no client has identified yet. Sessions whose websocket is gone
        (between RECONNECT and RESUME) keep the event for the RESUME replay.
        """
        await self._broadcast(event, data, require_session=True)

    async def message_create(
        self,
        *,
        channel_id: int,
        author_id: int,
        content: str,
        guild_id: int | None = None,
        mentions: Iterable[int] = (),
        message_id: int | None = None,
        referenced_message: dict[str, Any] | None = None,
        attachments: Iterable[dict[str, Any]] = (),
        webhook_id: int | None = None,
        author_bot: bool = False,
        embeds: Iterable[dict[str, Any]] = (),
        flags: int = 0,
        sticker_items: Iterable[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """A user (or a webhook) posts in a guild channel or thread: MESSAGE_CREATE.

        ``guild_id`` defaults to the channel's guild. With ``webhook_id`` the author becomes the
        webhook (author id = webhook id, username = the author's name, no member object).
        Attachments are dicts with optional ``filename``, ``content_type``, ``url``, ``size`` and
        ``data`` (bytes served by the fake CDN at the attachment's url).
        Returns the full message (with ``guild_id`` and ``member``), kept in channel history.
        """
        self._ensure_session("MESSAGE_CREATE")
        channel = self._channels.get(channel_id)
        if channel is None:
            raise KeyError(
                f"unknown channel {channel_id}: add it with add_text_channel/add_thread "
                "(or use dm_message for direct messages)"
            )
        channel_guild = _opt_int(channel.get("guild_id"))
        if guild_id is not None and channel_guild is not None and guild_id != channel_guild:
            raise ValueError(
                f"channel {channel_id} belongs to guild {channel_guild}, not {guild_id}"
            )
        guild_id = channel_guild if guild_id is None else guild_id
        user = self._users.get(author_id) or self._users_add(author_id, bot=author_bot)
        if webhook_id is not None:
            author: dict[str, Any] = {
                "id": str(webhook_id),
                "username": user["username"],
                "avatar": None,
                "discriminator": "0000",
                "bot": True,
                "public_flags": 0,
                "flags": 0,
                "global_name": None,
            }
            member = None
        else:
            author = copy.deepcopy(user)
            author["bot"] = bool(author_bot or user.get("bot"))
            member = self._member_payload(author_id, with_user=False) if guild_id else None
        msg = self._build_message(
            channel_id=channel_id,
            author=author,
            content=content,
            guild_id=guild_id,
            member=member,
            message_id=message_id,
        )
        if webhook_id is not None:
            msg["webhook_id"] = str(webhook_id)
        msg["mentions"] = [self._mention_payload(uid, guild_id) for uid in mentions]
        msg["embeds"] = [copy.deepcopy(e) for e in embeds]
        msg["flags"] = flags
        msg["sticker_items"] = [copy.deepcopy(s) for s in sticker_items]
        msg["attachments"] = [
            self._attachment_from_spec(channel_id, i, spec) for i, spec in enumerate(attachments)
        ]
        if referenced_message is not None:
            self._set_reference(msg, copy.deepcopy(referenced_message))
        self._store(msg)
        await self._broadcast("MESSAGE_CREATE", msg, require_session=True)
        return copy.deepcopy(msg)

    async def dm_message(
        self,
        *,
        user_id: int,
        content: str,
        message_id: int | None = None,
        attachments: Iterable[dict[str, Any]] = (),
        referenced_message: dict[str, Any] | None = None,
        flags: int = 0,
        sticker_items: Iterable[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """A user DMs the bot: MESSAGE_CREATE in the user's DM channel (type 1), no guild_id.
        ``flags=FLAG_VOICE_MESSAGE`` with an attachment carrying ``duration_secs`` and
        ``waveform`` is a voice message, as the Discord apps send one."""
        self._ensure_session("MESSAGE_CREATE")
        user = self._users.get(user_id) or self._users_add(user_id, bot=False)
        channel = self._dm_channel(user_id)
        channel_id = int(channel["id"])
        msg = self._build_message(
            channel_id=channel_id,
            author=copy.deepcopy(user),
            content=content,
            guild_id=None,
            member=None,
            message_id=message_id,
        )
        msg["flags"] = flags
        msg["sticker_items"] = [copy.deepcopy(s) for s in sticker_items]
        msg["attachments"] = [
            self._attachment_from_spec(channel_id, i, spec) for i, spec in enumerate(attachments)
        ]
        if referenced_message is not None:
            self._set_reference(msg, copy.deepcopy(referenced_message))
        self._store(msg)
        await self._broadcast("MESSAGE_CREATE", msg, require_session=True)
        return copy.deepcopy(msg)

    async def reaction_add(
        self, *, channel_id: int, message_id: int, user_id: int, emoji: str
    ) -> None:
        """A user reacts to a message with a Unicode ``emoji``: MESSAGE_REACTION_ADD."""
        self._ensure_session("MESSAGE_REACTION_ADD")
        msg = self._require_message(channel_id, message_id)
        parsed = self._parse_emoji(emoji)
        reactions = msg.setdefault("reactions", [])
        existing = next((r for r in reactions if r["emoji"] == parsed), None)
        if existing is None:
            reactions.append({"emoji": parsed, "count": 1, "me": False})
        else:
            existing["count"] += 1
        data: dict[str, Any] = {
            "user_id": str(user_id),
            "channel_id": str(channel_id),
            "message_id": str(message_id),
            "emoji": parsed,
            "burst": False,
            "type": 0,
            "message_author_id": msg["author"]["id"],
        }
        channel = self._channels.get(channel_id)
        if channel is not None and channel.get("guild_id"):
            data["guild_id"] = channel["guild_id"]
            data["member"] = self._member_payload(user_id, with_user=True)
        await self._broadcast("MESSAGE_REACTION_ADD", data, require_session=True)

    async def interaction(
        self,
        *,
        name: str,
        user_id: int,
        options: Iterable[dict[str, Any]] = (),
        guild_id: int | None = None,
        channel_id: int | None = None,
        sub: str | None = None,
        resolved: dict[str, Any] | None = None,
        locale: str = "en-US",
    ) -> dict[str, Any]:
        """A user runs slash command ``name``: INTERACTION_CREATE type 2 (APPLICATION_COMMAND).

        ``options`` are Discord option dicts; ``type`` may be left out for str/int/float/bool
        values. ``sub`` is "subcommand" or "group subcommand". Without guild and channel the
        command runs in the user's DM with the bot. ``data.guild_id`` is set when ``name`` was
        registered as a command of that guild (discord.py's CommandTree looks there first).
        Returns the payload (``id`` and ``token`` identify the interaction).
        """
        self._ensure_session("INTERACTION_CREATE")
        if channel_id is not None:
            channel = self._require_channel(channel_id)
            channel_guild = _opt_int(channel.get("guild_id"))
            if guild_id is None:
                guild_id = channel_guild
        elif guild_id is not None:
            guild = self._require_guild_world(guild_id)
            if not guild["channels"]:
                raise KeyError(f"guild {guild_id} has no text channel to run the command in")
            channel = self._channels[guild["channels"][0]]
        else:
            channel = self._dm_channel(user_id)
        channel_id = int(channel["id"])

        opts = [self._normalize_option(o) for o in options]
        if sub:
            parts = sub.split()
            if len(parts) == 1:
                opts = [{"type": 1, "name": parts[0], "options": opts}]
            elif len(parts) == 2:
                inner = {"type": 1, "name": parts[1], "options": opts}
                opts = [{"type": 2, "name": parts[0], "options": [inner]}]
            else:
                raise ValueError("sub must be 'subcommand' or 'group subcommand'")

        data: dict[str, Any] = {"name": name, "type": 1, "options": opts}
        registered = None
        if guild_id is not None:
            registered = self._find_command(guild_id, name)
            if registered is not None:
                data["guild_id"] = str(guild_id)
        if registered is None:
            registered = self._find_command(None, name)
        data["id"] = registered["id"] if registered else str(self._snowflake())
        if resolved is not None:
            data["resolved"] = copy.deepcopy(resolved)

        return await self._create_interaction(
            INTERACTION_COMMAND, data, user_id, channel, guild_id, locale=locale
        )

    async def press_button(
        self, *, channel_id: int, message_id: int, user_id: int, custom_id: str
    ) -> dict[str, Any]:
        """A user presses the button ``custom_id`` on a message the bot sent in ``channel_id``
        (for a DM, the DM channel's id: :meth:`dm_channel_id`): INTERACTION_CREATE type 3
        (MESSAGE_COMPONENT) with the message it is on. A button the message does not carry
        raises, as Discord offers no such press. Returns the payload."""
        self._ensure_session("INTERACTION_CREATE")
        channel = self._require_channel(channel_id)
        message = self._require_message(channel_id, message_id)
        ids = [
            item.get("custom_id")
            for row in message.get("components") or []
            for item in row.get("components") or []
        ]
        if custom_id not in ids:
            raise KeyError(f"message {message_id} has no button {custom_id!r} (it has {ids})")
        if channel["type"] == CHANNEL_DM and self._dm_by_user.get(user_id) != channel_id:
            raise KeyError(f"user {user_id} is not in the DM {channel_id}")
        data = {"custom_id": custom_id, "component_type": COMPONENT_BUTTON}
        guild_id = _opt_int(channel.get("guild_id"))
        return await self._create_interaction(
            INTERACTION_COMPONENT, data, user_id, channel, guild_id, self._rest_view(message)
        )

    async def _create_interaction(
        self,
        kind: int,
        data: dict[str, Any],
        user_id: int,
        channel: dict[str, Any],
        guild_id: int | None,
        message: dict[str, Any] | None = None,
        *,
        locale: str = "en-US",
    ) -> dict[str, Any]:
        """Record an interaction of ``kind`` and dispatch its INTERACTION_CREATE."""
        user = self._users.get(user_id) or self._users_add(user_id, bot=False)
        channel_id = int(channel["id"])
        interaction_id = self._snowflake()
        token = f"interaction-{interaction_id}-{secrets.token_hex(8)}"
        perms = str(self._everyone_permissions())
        payload: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(self.application_id),
            "type": kind,
            "data": data,
            "channel_id": str(channel_id),
            "channel": self._interaction_channel(channel),
            "token": token,
            "version": 1,
            "app_permissions": perms,
            "locale": locale,
            "entitlements": [],
            "entitlement_sku_ids": [],
            "attachment_size_limit": ATTACHMENT_SIZE_LIMIT,
        }
        if guild_id is not None:
            member = self._member_payload(user_id, with_user=True)
            member["permissions"] = perms
            payload.update(
                guild_id=str(guild_id),
                guild={"id": str(guild_id), "locale": "en-US", "features": []},
                guild_locale="en-US",
                member=member,
                authorizing_integration_owners={"0": str(guild_id)},
                context=0,
            )
        else:
            payload.update(
                user=copy.deepcopy(user),
                authorizing_integration_owners={"1": str(user_id)},
                context=1,
            )
        if message is not None:
            payload["message"] = message
        loop = asyncio.get_running_loop()
        self._interactions[interaction_id] = _Interaction(
            id=interaction_id,
            token=token,
            payload=payload,
            created=loop.time(),
            channel_id=channel_id,
            guild_id=guild_id,
        )
        await self._broadcast("INTERACTION_CREATE", payload, require_session=True)
        return copy.deepcopy(payload)

    async def reconnect(self, *, wait: bool = False, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Send op 7 RECONNECT on every live connection.

        Events dispatched from now until the client RESUMEs are kept and replayed after its
        RESUME (then RESUMED). With ``wait=True`` return only once every session has resumed.
        """
        target = self.resumed_count
        for session in list(self._sessions.values()):
            if session.ended or session.conn is None:
                continue
            async with session.lock:
                conn, session.conn = session.conn, None
                if conn is not None:
                    await conn.send({"op": OP_RECONNECT, "d": None, "s": None, "t": None})
                    target += 1
        if wait:
            await self.wait_until(
                lambda: self.resumed_count >= target, timeout, "the client to RESUME"
            )

    async def disconnect(self, code: int = 4000) -> None:
        """Close every gateway websocket from the server side with ``code``.

        4000 (and most 4xxx codes) let discord.py RESUME after its reconnect backoff (up to
        ~1 s on the first try); 4004 means authentication failed, 4014 disallowed intents.
        """
        for conn in list(self._connections):
            session = conn.session
            if session is not None and session.conn is conn:
                session.conn = None
            conn.closed_by_server = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.ws.close(code=code), 2.0)

    async def invalidate_session(self, *, resumable: bool = False) -> None:
        """Send op 9 INVALID_SESSION on every live connection (false: the client re-IDENTIFYs)."""
        for session in list(self._sessions.values()):
            if session.ended or session.conn is None:
                continue
            async with session.lock:
                conn = session.conn
                if not resumable:
                    session.ended = True
                    session.conn = None
                await conn.send({"op": OP_INVALID_SESSION, "d": resumable, "s": None, "t": None})

    # ------------------------------------------------------------------ failures

    def fail_next(
        self,
        method: str,
        path_prefix: str,
        *,
        status: int = 429,
        retry_after: float = 0.05,
        count: int = 1,
        via_header: bool = True,
        is_global: bool = False,
        body: dict[str, Any] | None = None,
    ) -> None:
        """Answer the next ``count`` REST requests matching method and path prefix with an error.

        429: JSON ``{"message", "retry_after", "global"}``, ``Retry-After`` and X-RateLimit
        headers, plus ``Via`` when ``via_header`` (without it discord.py raises instead of
        retrying, as it takes the 429 for a Cloudflare ban). Other statuses answer
        ``{"message", "code": 0}`` unless ``body`` is given.
        """
        self._failures.append(
            _Failure(
                method=method.upper(),
                path_prefix=path_prefix,
                status=status,
                retry_after=retry_after,
                remaining=count,
                via_header=via_header,
                is_global=is_global,
                body=body,
            )
        )

    def hold_next(self, method: str, path_prefix: str) -> Hold:
        """Hold the next REST request matching method and path prefix unanswered, before it
        takes effect (a message is not created), until the hold is released; ``arrived`` is
        set once it is being held. A process stopped meanwhile never learns its outcome."""
        hold = Hold(method.upper(), path_prefix)
        self._holds.append(hold)
        return hold

    # ------------------------------------------------------------------ assertions

    def calls(
        self, method: str | None = None, path: str | None = None, *, include_failed: bool = False
    ) -> list[RestCall]:
        """Recorded REST calls filtered by method and exact path (only 2xx unless asked)."""
        return [
            c
            for c in self.rest_calls
            if (method is None or c.method == method.upper())
            and (path is None or c.path == path)
            and (include_failed or c.ok)
        ]

    def sent_messages(
        self, channel_id: int | None = None, *, include_failed: bool = False
    ) -> list[RestCall]:
        """Successful ``POST /channels/{id}/messages`` calls (all attempts with include_failed)."""
        pattern = re.compile(
            r"^/channels/" + (str(channel_id) if channel_id is not None else r"\d+") + "/messages$"
        )
        return [
            c
            for c in self.rest_calls
            if c.method == "POST" and pattern.match(c.path) and (include_failed or c.ok)
        ]

    def webhook_messages(self, *, include_failed: bool = False) -> list[RestCall]:
        """``POST /webhooks/{id}/{token}`` calls to channel webhooks (not interaction followups)."""
        app_prefix = f"/webhooks/{self.application_id}/"
        return [
            c
            for c in self.rest_calls
            if c.method == "POST"
            and re.match(r"^/webhooks/\d+/[^/]+$", c.path)
            and not c.path.startswith(app_prefix)
            and (include_failed or c.ok)
        ]

    def interaction_responses(self, *, include_failed: bool = False) -> list[RestCall]:
        """``POST /interactions/{id}/{token}/callback`` calls."""
        return [
            c
            for c in self.rest_calls
            if c.method == "POST"
            and c.path.startswith("/interactions/")
            and c.path.endswith("/callback")
            and (include_failed or c.ok)
        ]

    def interaction_followups(self, *, include_failed: bool = False) -> list[RestCall]:
        """Calls on ``/webhooks/{application_id}/{token}...``: followups and original edits."""
        app_prefix = f"/webhooks/{self.application_id}/"
        return [
            c for c in self.rest_calls if c.path.startswith(app_prefix) and (include_failed or c.ok)
        ]

    async def wait_until(
        self,
        predicate: Callable[[], T | None],
        timeout: float = 5.0,  # noqa: ASYNC109
        what: str = "a condition",
    ) -> T:
        """Wait until ``predicate()`` is truthy (re-checked whenever the fake's state changes)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"FakeDiscord: timed out after {timeout:g}s waiting for {what}")
            event = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await event.wait()

    async def wait_for_rest(
        self,
        predicate: Callable[[RestCall], bool],
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> RestCall:
        """Return the first recorded REST call (earlier or future) matching ``predicate``."""

        def find() -> RestCall | None:
            return next((c for c in self.rest_calls if predicate(c)), None)

        try:
            return await self.wait_until(find, timeout, "a matching REST call")
        except TimeoutError:
            seen = "\n".join(f"  {c.method} {c.path} -> {c.status}" for c in self.rest_calls[-20:])
            raise TimeoutError(
                f"FakeDiscord: no REST call matched within {timeout:g}s; "
                f"{len(self.rest_calls)} calls recorded, the last ones:\n{seen or '  (none)'}"
            ) from None

    async def wait_connected(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        await self.wait_until(lambda: self.connected, timeout, "a client to IDENTIFY")

    # ================================================================== internals: helpers

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _snowflake(self) -> int:
        now_ms = int(time.time() * 1000)
        value = max(self._last_snowflake + 1, (now_ms - DISCORD_EPOCH_MS) << 22)
        self._last_snowflake = value
        return value

    def _new_user(self, user_id: int, name: str, *, bot: bool) -> dict[str, Any]:
        return {
            "id": str(user_id),
            "username": name,
            "global_name": None if bot else name,
            "discriminator": "0",
            "avatar": None,
            "bot": bot,
            "system": False,
            "public_flags": 0,
            "flags": 0,
            "banner": None,
            "accent_color": None,
            "avatar_decoration_data": None,
        }

    def _users_add(self, user_id: int, *, bot: bool) -> dict[str, Any]:
        self.add_user(user_id, f"user{user_id}", bot=bot)
        return self._users[user_id]

    def _require_user(self, user_id: int) -> dict[str, Any]:
        try:
            return self._users[user_id]
        except KeyError:
            raise ApiError(404, 10013, "Unknown User") from None

    def _require_guild_world(self, guild_id: int) -> dict[str, Any]:
        try:
            return self._guilds[guild_id]
        except KeyError:
            raise KeyError(f"unknown guild {guild_id}: add it with add_guild") from None

    def _require_guild(self, guild_id: int) -> dict[str, Any]:
        try:
            return self._guilds[guild_id]
        except KeyError:
            raise ApiError(404, 10004, "Unknown Guild") from None

    def _require_channel(self, channel_id: int) -> dict[str, Any]:
        try:
            return self._channels[channel_id]
        except KeyError:
            raise ApiError(404, 10003, "Unknown Channel") from None

    def _bot_user(self) -> dict[str, Any]:
        return copy.deepcopy(self._users[self.bot_id])

    def _bot_user_full(self) -> dict[str, Any]:
        user = self._bot_user()
        user.update(verified=True, mfa_enabled=False, email=None, locale="en-US")
        return user

    def _everyone_permissions(self) -> int:
        perms = ALL_PERMISSIONS & ~ADMINISTRATOR
        if not self.manage_webhooks:
            perms &= ~MANAGE_WEBHOOKS
        return perms

    def _everyone_role(self, guild_id: int) -> dict[str, Any]:
        return {
            "id": str(guild_id),
            "name": "@everyone",
            "permissions": str(self._everyone_permissions()),
            "position": 0,
            "color": 0,
            "colors": {"primary_color": 0, "secondary_color": None, "tertiary_color": None},
            "hoist": False,
            "managed": False,
            "mentionable": False,
            "icon": None,
            "unicode_emoji": None,
            "flags": 0,
        }

    def _member_payload(self, user_id: int, *, with_user: bool) -> dict[str, Any]:
        member: dict[str, Any] = {
            "roles": [],
            "joined_at": self._joined.get(user_id, _iso()),
            "premium_since": None,
            "deaf": False,
            "mute": False,
            "flags": 0,
            "pending": False,
            "nick": None,
            "avatar": None,
            "banner": None,
            "communication_disabled_until": None,
        }
        if with_user:
            member["user"] = copy.deepcopy(self._users[user_id])
        return member

    def _mention_payload(self, user_id: int, guild_id: int | None) -> dict[str, Any]:
        user = self._users.get(user_id) or self._users_add(user_id, bot=False)
        mention = copy.deepcopy(user)
        if guild_id is not None:
            mention["member"] = self._member_payload(user_id, with_user=False)
        return mention

    def _dm_channel(self, user_id: int) -> dict[str, Any]:
        user = self._users.get(user_id) or self._users_add(user_id, bot=False)
        channel_id = self._dm_by_user.get(user_id)
        if channel_id is None:
            channel_id = self._snowflake()
            self._dm_by_user[user_id] = channel_id
            self._channels[channel_id] = {
                "id": str(channel_id),
                "type": CHANNEL_DM,
                "last_message_id": None,
                "flags": 0,
                "recipients": [copy.deepcopy(user)],
            }
            self._history.setdefault(channel_id, [])
        return self._channels[channel_id]

    def _interaction_channel(self, channel: dict[str, Any]) -> dict[str, Any]:
        payload = copy.deepcopy(channel)
        if channel["type"] != CHANNEL_DM:
            payload["permissions"] = str(self._everyone_permissions())
        return payload

    def _guild_create_payload(self, guild_id: int, intents: int) -> dict[str, Any]:
        guild = self._guilds[guild_id]
        all_members = list(self._users)
        listed = all_members if intents & INTENT_GUILD_MEMBERS else [self.bot_id]
        return {
            "id": str(guild_id),
            "name": guild["name"],
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(guild["owner_id"]),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "premium_progress_bar_enabled": False,
            "preferred_locale": "en-US",
            "system_channel_id": None,
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "safety_alerts_channel_id": None,
            "vanity_url_code": None,
            "application_id": None,
            "max_members": 500_000,
            "max_video_channel_users": 25,
            "features": [],
            "roles": [self._everyone_role(guild_id)],
            "emojis": [],
            "stickers": [],
            "joined_at": guild["joined_at"],
            "large": False,
            "unavailable": False,
            "lazy": True,
            "member_count": len(all_members),
            "members": [self._member_payload(uid, with_user=True) for uid in listed],
            "channels": [
                {k: v for k, v in self._channels[c].items() if k != "guild_id"}
                for c in guild["channels"]
            ],
            "threads": [copy.deepcopy(self._channels[t]) for t in guild["threads"]],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
        }

    def _build_message(
        self,
        *,
        channel_id: int,
        author: dict[str, Any],
        content: str,
        guild_id: int | None,
        member: dict[str, Any] | None,
        message_id: int | None = None,
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "id": str(message_id if message_id is not None else self._snowflake()),
            "channel_id": str(channel_id),
            "type": MESSAGE_DEFAULT,
            "content": content,
            "author": author,
            "attachments": [],
            "embeds": [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "timestamp": _iso(),
            "edited_timestamp": None,
            "flags": 0,
            "components": [],
        }
        if guild_id is not None:
            msg["guild_id"] = str(guild_id)
        if member is not None:
            msg["member"] = member
        return msg

    def _find_message(self, channel_id: int, message_id: int) -> dict[str, Any] | None:
        return next(
            (m for m in self._history.get(channel_id, []) if m["id"] == str(message_id)), None
        )

    def _require_message(self, channel_id: int, message_id: int) -> dict[str, Any]:
        msg = self._find_message(channel_id, message_id)
        if msg is None:
            raise ApiError(404, 10008, "Unknown Message")
        return msg

    def _sorted_history(self, channel_id: int) -> list[dict[str, Any]]:
        return sorted(self._history.get(channel_id, []), key=lambda m: int(m["id"]))

    def _store(self, msg: dict[str, Any]) -> None:
        channel_id = int(msg["channel_id"])
        self._history.setdefault(channel_id, []).append(msg)
        channel = self._channels.get(channel_id)
        if channel is not None:
            channel["last_message_id"] = msg["id"]
            if channel["type"] == CHANNEL_PUBLIC_THREAD:
                channel["message_count"] += 1
                channel["total_message_sent"] += 1

    def _set_reference(self, msg: dict[str, Any], referenced: dict[str, Any]) -> None:
        referenced.pop("referenced_message", None)
        msg["type"] = MESSAGE_REPLY
        msg["message_reference"] = {
            "type": 0,
            "message_id": referenced["id"],
            "channel_id": referenced["channel_id"],
            "guild_id": msg.get("guild_id") or referenced.get("guild_id"),
        }
        msg["referenced_message"] = referenced

    def _attachment_from_spec(
        self, channel_id: int, index: int, spec: dict[str, Any]
    ) -> dict[str, Any]:
        spec = dict(spec)
        data = spec.pop("data", None)
        attachment_id = int(spec.pop("id", 0)) or self._snowflake()
        filename = spec.pop("filename", f"file{index}.bin")
        content_type = spec.pop("content_type", None) or (
            mimetypes.guess_type(filename)[0] or "application/octet-stream"
        )
        if data is not None:
            url = self._cdn_put(channel_id, attachment_id, filename, bytes(data), content_type)
        else:
            url = spec.pop(
                "url", f"{self.cdn_base}/attachments/{channel_id}/{attachment_id}/{filename}"
            )
        attachment: dict[str, Any] = {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data) if data is not None else int(spec.pop("size", 0)),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        attachment.update(spec)
        return attachment

    def _cdn_put(
        self, channel_id: int, attachment_id: int, filename: str, data: bytes, content_type: str
    ) -> str:
        path = f"attachments/{channel_id}/{attachment_id}/{filename}"
        self._cdn[path] = (data, content_type)
        return f"{self.cdn_base}/{path}"

    @staticmethod
    def _normalize_option(option: dict[str, Any]) -> dict[str, Any]:
        result = copy.deepcopy(option)
        if "type" not in result:
            value = result.get("value")
            if isinstance(value, bool):
                result["type"] = 5
            elif isinstance(value, int):
                result["type"] = 4
            elif isinstance(value, float):
                result["type"] = 10
            else:
                result["type"] = 3
        return result

    def _find_command(self, scope: int | None, name: str) -> dict[str, Any] | None:
        return next((c for c in self.commands.get(scope, []) if c["name"] == name), None)

    # ================================================================== internals: gateway

    def _filter_for_session(
        self, session: _Session, event: str, data: dict[str, Any]
    ) -> dict[str, Any] | None:
        needed = _EVENT_INTENTS.get(event)
        in_guild = "guild_id" in data and data["guild_id"] is not None
        if needed is not None:
            intent = needed[0] if in_guild else needed[1]
            if not session.intents & intent:
                return None
        payload = copy.deepcopy(data)
        if (
            event in _CONTENT_EVENTS
            and in_guild
            and not session.intents & INTENT_MESSAGE_CONTENT
            and payload.get("author", {}).get("id") != str(self.bot_id)
            and not any(m.get("id") == str(self.bot_id) for m in payload.get("mentions", []))
        ):
            payload.update(content="", embeds=[], attachments=[], components=[])
            payload.pop("poll", None)
        return payload

    @staticmethod
    def _on_shard(session: _Session, guild_id: int | None) -> bool:
        shard_id, shard_count = session.shard
        return shard_of(guild_id, shard_count) == shard_id

    async def _send_dispatch_locked(self, session: _Session, event: str, data: JSON) -> None:
        session.seq += 1
        frame = {"op": OP_DISPATCH, "s": session.seq, "t": event, "d": data}
        session.log.append(frame)
        conn = session.conn
        if conn is not None and not await conn.send(frame) and session.conn is conn:
            session.conn = None

    def _ensure_session(self, event: str) -> None:
        if not any(not s.ended for s in self._sessions.values()):
            raise RuntimeError(
                f"FakeDiscord: cannot dispatch {event}: no client has identified on the "
                "gateway (start client.connect() and wait until it is ready)"
            )

    async def _broadcast(self, event: str, data: dict[str, Any], *, require_session: bool) -> None:
        if require_session:
            self._ensure_session(event)
        guild_id = _opt_int(data.get("guild_id"))
        sessions = [s for s in self._sessions.values() if not s.ended]
        for session in sessions:
            if not self._on_shard(session, guild_id):
                continue
            payload = self._filter_for_session(session, event, data)
            if payload is None:
                continue
            async with session.lock:
                await self._send_dispatch_locked(session, event, payload)
        self._notify()

    async def _broadcast_guild_create(self, guild_id: int) -> None:
        for session in [s for s in self._sessions.values() if not s.ended]:
            if not self._on_shard(session, guild_id):
                continue
            async with session.lock:
                payload = self._guild_create_payload(guild_id, session.intents)
                await self._send_dispatch_locked(session, "GUILD_CREATE", payload)

    async def _gateway_handler(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(max_msg_size=0, timeout=2.0)
        await ws.prepare(request)
        conn = _Connection(ws=ws, path=request.path)
        self._connections.add(conn)
        self.gateway_connections.append(request.path)
        try:
            hello = {"heartbeat_interval": HEARTBEAT_INTERVAL_MS, "_trace": ["fake-gateway"]}
            await conn.send({"op": OP_HELLO, "d": hello, "s": None, "t": None})
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    try:
                        frame = json.loads(msg.data)
                    except ValueError:
                        await ws.close(code=4002, message=b"Error while decoding payload.")
                        break
                    try:
                        await self._on_gateway_frame(conn, frame)
                    except Exception:
                        _log.exception("fake gateway failed on %r", frame)
                elif msg.type == WSMsgType.BINARY:
                    await ws.close(code=4002, message=b"Error while decoding payload.")
                    break
        finally:
            self._connections.discard(conn)
            session = conn.session
            if session is not None and session.conn is conn:
                session.conn = None
            if session is not None and not conn.closed_by_server and ws.close_code in (1000, 1001):
                # A client closing with 1000/1001 ends its session (Discord does the same).
                session.ended = True
            self._notify()
        return ws

    async def _on_gateway_frame(self, conn: _Connection, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        data = frame.get("d")
        if op == OP_HEARTBEAT:
            self.heartbeats += 1
            await conn.send({"op": OP_HEARTBEAT_ACK, "d": None, "s": None, "t": None})
            return
        self.gateway_received.append(frame)
        if op == OP_IDENTIFY:
            await self._on_identify(conn, data or {})
        elif op == OP_RESUME:
            await self._on_resume(conn, data or {})
        elif op == OP_REQUEST_GUILD_MEMBERS:
            await self._on_request_members(conn, data or {})
        elif op in (OP_PRESENCE_UPDATE, OP_VOICE_STATE_UPDATE):
            pass
        else:
            await conn.ws.close(code=4001, message=b"Unknown opcode.")
        self._notify()

    async def _on_identify(self, conn: _Connection, data: dict[str, Any]) -> None:
        self.identifies.append(copy.deepcopy(data))
        if data.get("token") != self.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        if conn.session is not None:
            await conn.ws.close(code=4005, message=b"Already authenticated.")
            return
        intents = int(data.get("intents", 0))
        if intents & PRIVILEGED_INTENTS & ~self.allowed_privileged_intents:
            await conn.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        shard = [int(part) for part in data.get("shard") or [0, 1]]
        if len(shard) != 2 or not 0 <= shard[0] < shard[1]:
            await conn.ws.close(code=4010, message=b"Invalid shard.")
            return
        guilds = [g for g in self._guilds if shard_of(g, shard[1]) == shard[0]]
        self._note_overlap(shard, None)
        session = _Session(session_id=uuid.uuid4().hex, intents=intents, shard=shard)
        self._sessions[session.session_id] = session
        async with session.lock:
            session.conn = conn
            conn.session = session
            ready = {
                "v": API_VERSION,
                "user": self._bot_user_full(),
                "guilds": [{"id": str(g), "unavailable": True} for g in guilds],
                "session_id": session.session_id,
                "session_type": "normal",
                "resume_gateway_url": self.resume_gateway_url,
                "shard": shard,
                "application": {"id": str(self.application_id), "flags": 0},
                "private_channels": [],
                "relationships": [],
                "presences": [],
                "guild_join_requests": [],
                "geo_ordered_rtc_regions": [],
                "user_settings": {},
                "auth": {},
                "_trace": ["fake-gateway"],
            }
            await self._send_dispatch_locked(session, "READY", ready)
            for guild_id in guilds:
                payload = self._guild_create_payload(guild_id, intents)
                await self._send_dispatch_locked(session, "GUILD_CREATE", payload)

    async def _on_resume(self, conn: _Connection, data: dict[str, Any]) -> None:
        self.resumes.append(copy.deepcopy(data))
        session = self._sessions.get(str(data.get("session_id")))
        if session is None or session.ended or data.get("token") != self.token:
            await conn.send({"op": OP_INVALID_SESSION, "d": False, "s": None, "t": None})
            return
        self._note_overlap(session.shard, session)
        async with session.lock:
            old = session.conn
            session.conn = None
            if old is not None and old is not conn:
                old.session = None
                old.closed_by_server = True
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(old.ws.close(code=4000), 1.0)
            last_seen = int(data.get("seq") or 0)
            for frame in session.log:
                if frame["s"] > last_seen and not await conn.send(frame):
                    return
            session.seq += 1
            resumed = {"op": OP_DISPATCH, "s": session.seq, "t": "RESUMED", "d": {"_trace": []}}
            if not await conn.send(resumed):
                return
            session.conn = conn
            conn.session = session
            self.resumed_count += 1

    async def _on_request_members(self, conn: _Connection, data: dict[str, Any]) -> None:
        session = conn.session
        if session is None:
            await conn.ws.close(code=4003, message=b"Not authenticated.")
            return
        guild_ids = data.get("guild_id")
        if not isinstance(guild_ids, list):
            guild_ids = [guild_ids]
        wanted = {int(u) for u in data.get("user_ids") or []}
        query = str(data.get("query") or "").lower()
        for raw in guild_ids:
            guild_id = int(raw)
            if guild_id not in self._guilds:
                continue
            members = [
                self._member_payload(uid, with_user=True)
                for uid, user in self._users.items()
                if (not wanted or uid in wanted) and user["username"].lower().startswith(query)
            ]
            chunk: dict[str, Any] = {
                "guild_id": str(guild_id),
                "members": members,
                "chunk_index": 0,
                "chunk_count": 1,
                "not_found": [str(u) for u in wanted if u not in self._users],
            }
            if data.get("nonce") is not None:
                chunk["nonce"] = data["nonce"]
            async with session.lock:
                await self._send_dispatch_locked(session, "GUILD_MEMBERS_CHUNK", chunk)

    # ================================================================== internals: HTTP

    @staticmethod
    def _json_response(
        status: int, body: JSON, headers: dict[str, str] | None = None
    ) -> web.Response:
        if status == 204:
            return web.Response(status=204, headers=headers)
        all_headers = {"Content-Type": "application/json"}
        all_headers.update(headers or {})
        return web.Response(status=status, body=json.dumps(body).encode(), headers=all_headers)

    async def _not_found_handler(self, _request: web.Request) -> web.Response:
        return self._json_response(404, {"message": "404: Not Found", "code": 0})

    async def _cdn_handler(self, request: web.Request) -> web.Response:
        entry = self._cdn.get(request.match_info["tail"])
        self.cdn_downloads.append(request.match_info["tail"])
        if entry is None:
            return web.Response(status=404, text="Not Found")
        data, content_type = entry
        return web.Response(body=data, headers={"Content-Type": content_type})

    async def _read_body(self, request: web.Request) -> tuple[Any, list[tuple[str, bytes]]]:
        if not request.can_read_body:
            return None, []
        if request.content_type == "multipart/form-data":
            form = await request.post()
            files: list[tuple[str, bytes]] = []
            payload: Any = None
            for name, value in form.items():
                if isinstance(value, web.FileField):
                    files.append((value.filename, value.file.read()))
                elif name == "payload_json":
                    text = value.decode() if isinstance(value, bytes | bytearray) else str(value)
                    payload = json.loads(text)
            return payload, files
        raw = await request.read()
        if not raw:
            return None, []
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text), []
        except ValueError:
            return text, []

    def _take_failure(self, method: str, path: str) -> tuple[int, JSON, dict[str, str]] | None:
        for failure in self._failures:
            if failure.method == method and path.startswith(failure.path_prefix):
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failures.remove(failure)
                return self._failure_answer(failure)
        return None

    def _take_hold(self, method: str, path: str) -> Hold | None:
        for hold in self._holds:
            if hold.method == method and path.startswith(hold.path_prefix):
                self._holds.remove(hold)
                return hold
        return None

    @staticmethod
    def _failure_answer(failure: _Failure) -> tuple[int, JSON, dict[str, str]]:
        headers: dict[str, str] = {}
        if failure.status == 429:
            body = failure.body or {
                "message": "You are being rate limited.",
                "retry_after": failure.retry_after,
                "global": failure.is_global,
            }
            bucket = _fake_hash(f"{failure.method} {failure.path_prefix}")[:16]
            headers = {
                "Retry-After": str(max(1, math.ceil(failure.retry_after))),
                "X-RateLimit-Limit": "5",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": f"{time.time() + failure.retry_after:.3f}",
                "X-RateLimit-Reset-After": f"{failure.retry_after:.3f}",
                "X-RateLimit-Bucket": bucket,
                "X-RateLimit-Scope": "global" if failure.is_global else "user",
            }
            if failure.is_global:
                headers["X-RateLimit-Global"] = "true"
            if failure.via_header:
                headers["Via"] = "1.1 google"
        else:
            messages = {
                400: "400: Bad Request",
                401: "401: Unauthorized",
                403: "Missing Permissions",
                404: "404: Not Found",
                500: "500: Internal Server Error",
                502: "502: Bad Gateway",
                503: "503: Service Unavailable",
                504: "504: Gateway Timeout",
            }
            code = 50013 if failure.status == 403 else 0
            body = failure.body or {
                "message": messages.get(failure.status, f"{failure.status}: Error"),
                "code": code,
            }
        return failure.status, body, headers

    async def _rest_handler(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        path = "/" + request.match_info["tail"]
        method = request.method.upper()
        try:
            body, files = await self._read_body(request)
        except ValueError:
            body, files = None, []
        call = RestCall(
            method=method,
            path=path,
            json=body,
            files=files,
            headers=dict(request.headers),
            time=arrived,
            query=dict(request.query),
        )
        hold = self._take_hold(method, path)
        if hold is not None:
            hold.call = call
            hold.arrived.set()
            self._notify()
            await hold.released.wait()  # cancelled if the client goes away first
        extra_headers: dict[str, str] = {}
        failure = self._take_failure(method, path)
        if failure is not None:
            status, answer, extra_headers = failure
        else:
            try:
                status, answer = await self._route(call)
            except ApiError as exc:
                status, answer = exc.status, exc.body()
            except Exception:
                _log.exception("fake Discord REST handler failed for %s %s", method, path)
                status, answer = 500, {"message": "500: Internal Server Error", "code": 0}
        call.status = status
        call.response = None if status == 204 else copy.deepcopy(answer)
        self.rest_calls.append(call)
        self._notify()
        return self._json_response(status, answer, extra_headers)

    async def _route(self, call: RestCall) -> tuple[int, JSON]:
        path_matched = False
        for method, pattern, handler, needs_auth in self._routes:
            match = pattern.fullmatch(call.path)
            if match is None:
                continue
            path_matched = True
            if method != call.method:
                continue
            if needs_auth and call.header("Authorization") != f"Bot {self.token}":
                raise ApiError(401, 0, "401: Unauthorized")
            return await handler(call, match.groupdict())
        if path_matched:
            raise ApiError(405, 0, "405: Method Not Allowed")
        raise ApiError(404, 0, "404: Not Found")

    def _build_routes(self) -> list[tuple[str, re.Pattern[str], _Handler, bool]]:
        snowflake = r"\d+"
        table: list[tuple[str, str, _Handler, bool]] = [
            ("GET", r"/users/@me", self._get_me, True),
            ("POST", r"/users/@me/channels", self._create_dm, True),
            ("GET", rf"/users/(?P<uid>{snowflake})", self._get_user, True),
            ("GET", r"/gateway", self._get_gateway, False),
            ("GET", r"/gateway/bot", self._get_gateway_bot, True),
            ("GET", r"/applications/@me", self._get_application, True),
            ("GET", r"/oauth2/applications/@me", self._get_application, True),
            ("GET", rf"/guilds/(?P<gid>{snowflake})", self._get_guild, True),
            ("GET", rf"/guilds/(?P<gid>{snowflake})/channels", self._get_guild_channels, True),
            (
                "GET",
                rf"/guilds/(?P<gid>{snowflake})/members/(?P<uid>{snowflake})",
                self._get_member,
                True,
            ),
            ("GET", rf"/guilds/(?P<gid>{snowflake})/webhooks", self._get_guild_webhooks, True),
            ("GET", rf"/channels/(?P<cid>{snowflake})", self._get_channel, True),
            ("POST", rf"/channels/(?P<cid>{snowflake})/messages", self._post_message, True),
            ("GET", rf"/channels/(?P<cid>{snowflake})/messages", self._get_messages, True),
            (
                "GET",
                rf"/channels/(?P<cid>{snowflake})/messages/(?P<mid>{snowflake})",
                self._get_message,
                True,
            ),
            (
                "PATCH",
                rf"/channels/(?P<cid>{snowflake})/messages/(?P<mid>{snowflake})",
                self._edit_message,
                True,
            ),
            (
                "DELETE",
                rf"/channels/(?P<cid>{snowflake})/messages/(?P<mid>{snowflake})",
                self._delete_message,
                True,
            ),
            (
                "PUT",
                rf"/channels/(?P<cid>{snowflake})/messages/(?P<mid>{snowflake})"
                r"/reactions/(?P<emoji>[^/]+)/@me",
                self._add_reaction,
                True,
            ),
            (
                "DELETE",
                rf"/channels/(?P<cid>{snowflake})/messages/(?P<mid>{snowflake})"
                r"/reactions/(?P<emoji>[^/]+)/@me",
                self._remove_reaction,
                True,
            ),
            ("POST", rf"/channels/(?P<cid>{snowflake})/typing", self._typing, True),
            ("GET", rf"/channels/(?P<cid>{snowflake})/webhooks", self._get_channel_webhooks, True),
            ("POST", rf"/channels/(?P<cid>{snowflake})/webhooks", self._create_webhook_route, True),
            ("GET", rf"/webhooks/(?P<wid>{snowflake})", self._get_webhook, True),
            ("PATCH", rf"/webhooks/(?P<wid>{snowflake})", self._edit_webhook, True),
            ("DELETE", rf"/webhooks/(?P<wid>{snowflake})", self._delete_webhook, True),
            ("GET", rf"/webhooks/(?P<wid>{snowflake})/(?P<token>[^/]+)", self._get_webhook, False),
            ("POST", rf"/webhooks/(?P<wid>{snowflake})/(?P<token>[^/]+)", self._execute, False),
            (
                "DELETE",
                rf"/webhooks/(?P<wid>{snowflake})/(?P<token>[^/]+)",
                self._delete_webhook,
                False,
            ),
            (
                "GET",
                rf"/webhooks/(?P<wid>{snowflake})/(?P<token>[^/]+)/messages/(?P<mid>@original|\d+)",
                self._get_webhook_message,
                False,
            ),
            (
                "PATCH",
                rf"/webhooks/(?P<wid>{snowflake})/(?P<token>[^/]+)/messages/(?P<mid>@original|\d+)",
                self._edit_webhook_message,
                False,
            ),
            (
                "DELETE",
                rf"/webhooks/(?P<wid>{snowflake})/(?P<token>[^/]+)/messages/(?P<mid>@original|\d+)",
                self._delete_webhook_message,
                False,
            ),
            ("GET", rf"/applications/(?P<app>{snowflake})/commands", self._get_commands, True),
            ("PUT", rf"/applications/(?P<app>{snowflake})/commands", self._put_commands, True),
            (
                "GET",
                rf"/applications/(?P<app>{snowflake})/guilds/(?P<gid>{snowflake})/commands",
                self._get_commands,
                True,
            ),
            (
                "PUT",
                rf"/applications/(?P<app>{snowflake})/guilds/(?P<gid>{snowflake})/commands",
                self._put_commands,
                True,
            ),
            (
                "POST",
                rf"/interactions/(?P<iid>{snowflake})/(?P<token>[^/]+)/callback",
                self._interaction_callback,
                False,
            ),
        ]
        return [(m, re.compile(p), h, a) for m, p, h, a in table]

    # ------------------------------------------------------------------ REST: users, gateway

    async def _get_me(self, _call: RestCall, _m: dict[str, str]) -> tuple[int, JSON]:
        return 200, self._bot_user_full()

    async def _get_user(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        return 200, copy.deepcopy(self._require_user(int(m["uid"])))

    async def _create_dm(self, call: RestCall, _m: dict[str, str]) -> tuple[int, JSON]:
        body = call.json if isinstance(call.json, dict) else {}
        if "recipient_id" not in body:
            raise _form_error("recipient_id", "BASE_TYPE_REQUIRED", "This field is required")
        user_id = int(body["recipient_id"])
        self._require_user(user_id)
        return 200, copy.deepcopy(self._dm_channel(user_id))

    async def _get_gateway(self, _call: RestCall, _m: dict[str, str]) -> tuple[int, JSON]:
        return 200, {"url": self.gateway_url}

    async def _get_gateway_bot(self, _call: RestCall, _m: dict[str, str]) -> tuple[int, JSON]:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}
        shards = self.recommended_shards
        return 200, {"url": self.gateway_url, "shards": shards, "session_start_limit": limit}

    def _application_flags(self) -> int:
        """The Developer Portal's intent switches as application flags: a bot in fewer than
        100 servers gets the ``_LIMITED`` variants."""
        flags = 0
        if self.allowed_privileged_intents & INTENT_MESSAGE_CONTENT:
            flags |= APP_FLAG_GATEWAY_MESSAGE_CONTENT_LIMITED
        if self.allowed_privileged_intents & INTENT_GUILD_MEMBERS:
            flags |= APP_FLAG_GATEWAY_GUILD_MEMBERS_LIMITED
        if self.allowed_privileged_intents & INTENT_GUILD_PRESENCES:
            flags |= APP_FLAG_GATEWAY_PRESENCE_LIMITED
        return flags

    async def _get_application(self, _call: RestCall, _m: dict[str, str]) -> tuple[int, JSON]:
        return 200, {
            "id": str(self.application_id),
            "name": self.bot_name,
            "icon": None,
            "description": "",
            "summary": "",
            "type": None,
            "bot_public": True,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "owner": copy.deepcopy(self._users[self.owner_id]),
            "team": None,
            "flags": self._application_flags(),
            "tags": [],
            "redirect_uris": [],
            "interactions_endpoint_url": None,
            "approximate_guild_count": len(self._guilds),
            "bot": self._bot_user(),
            "integration_types_config": {"0": {}},
        }

    # ------------------------------------------------------------------ REST: guilds, channels

    async def _get_guild(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        guild_id = int(m["gid"])
        self._require_guild(guild_id)
        payload = self._guild_create_payload(guild_id, 0)
        for key in ("members", "channels", "threads", "voice_states", "presences", "joined_at"):
            payload.pop(key, None)
        return 200, payload

    async def _get_guild_channels(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        guild = self._require_guild(int(m["gid"]))
        return 200, [copy.deepcopy(self._channels[c]) for c in guild["channels"]]

    async def _get_member(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        self._require_guild(int(m["gid"]))
        user_id = int(m["uid"])
        if user_id not in self._users:
            raise ApiError(404, 10007, "Unknown Member")
        return 200, self._member_payload(user_id, with_user=True)

    async def _get_channel(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        return 200, copy.deepcopy(self._require_channel(int(m["cid"])))

    async def _typing(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        self._require_channel(int(m["cid"]))
        return 204, None

    # ------------------------------------------------------------------ REST: messages

    def _validate_message(
        self, payload: dict[str, Any], files: list[tuple[str, bytes]], *, allow_empty: bool = False
    ) -> None:
        content = payload.get("content")
        if content is not None and not isinstance(content, str):
            raise _form_error("content", "BASE_TYPE_BAD_TYPE", "Must be a string.")
        if content is not None and len(content) > MESSAGE_CONTENT_LIMIT:
            raise _form_error(
                "content",
                "BASE_TYPE_MAX_LENGTH",
                f"Must be {MESSAGE_CONTENT_LIMIT} or fewer in length.",
            )
        embeds = payload.get("embeds") or []
        if len(embeds) > MAX_EMBEDS:
            raise _form_error(
                "embeds", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_EMBEDS} or fewer in length."
            )
        for data in (d for _, d in files):
            if len(data) > ATTACHMENT_SIZE_LIMIT:
                raise ApiError(413, 40005, "Request entity too large")
        has_body = bool(
            (content or "").strip()
            or embeds
            or files
            or payload.get("sticker_ids")
            or payload.get("components")
            or payload.get("poll")
        )
        if not has_body and not allow_empty:
            raise ApiError(400, 50006, "Cannot send an empty message")
        self._validate_components(payload.get("components") or [])

    def _apply_payload(
        self,
        msg: dict[str, Any],
        payload: dict[str, Any],
        files: list[tuple[str, bytes]],
        guild_id: int | None,
        *,
        editing: bool = False,
    ) -> None:
        """Copy the message fields of a create or edit payload onto ``msg``."""
        if "content" in payload:
            msg["content"] = payload.get("content") or ""
        if "embeds" in payload:
            msg["embeds"] = copy.deepcopy(payload.get("embeds") or [])
        if "components" in payload:
            msg["components"] = copy.deepcopy(payload.get("components") or [])
        if "tts" in payload:
            msg["tts"] = bool(payload["tts"])
        if payload.get("nonce") is not None:
            msg["nonce"] = payload["nonce"]
        if payload.get("poll") is not None:
            msg["poll"] = copy.deepcopy(payload["poll"])
        if payload.get("flags") is not None:
            kept = msg["flags"] & FLAG_EPHEMERAL
            msg["flags"] = (int(payload["flags"]) & ~FLAG_LOADING) | kept
        channel_id = int(msg["channel_id"])
        uploaded = [
            self._attachment_from_spec(channel_id, i, {"filename": name, "data": data})
            for i, (name, data) in enumerate(files)
        ]
        if not editing:
            msg["attachments"] = uploaded
        else:
            existing = msg["attachments"]
            if "attachments" in payload:
                wanted = {str(a.get("id")) for a in payload.get("attachments") or []}
                existing = [a for a in existing if a["id"] in wanted]
            msg["attachments"] = existing + uploaded
        content = msg.get("content") or ""
        mentioned: list[int] = []
        for raw in _MENTION_RE.findall(content):
            uid = int(raw)
            if uid in self._users and uid not in mentioned:
                mentioned.append(uid)
        allowed = payload.get("allowed_mentions")
        reply_author = None
        ref = msg.get("referenced_message")
        if ref is not None:
            pings_reply = allowed is None or bool(allowed.get("replied_user", False))
            if pings_reply:
                reply_author = int(ref["author"]["id"])
        if (
            reply_author is not None
            and reply_author in self._users
            and reply_author not in mentioned
        ):
            mentioned.append(reply_author)
        msg["mentions"] = [self._mention_payload(uid, guild_id) for uid in mentioned]
        everyone_allowed = allowed is None or "everyone" in (allowed.get("parse") or [])
        msg["mention_everyone"] = bool(
            guild_id is not None
            and everyone_allowed
            and ("@everyone" in content or "@here" in content)
        )

    def _resolve_reference(self, payload: dict[str, Any], channel_id: int) -> dict[str, Any] | None:
        ref = payload.get("message_reference")
        if not ref or ref.get("type", 0) != 0:
            return None
        ref_channel = int(ref.get("channel_id") or channel_id)
        target = self._find_message(ref_channel, int(ref["message_id"]))
        if target is None and ref.get("fail_if_not_exists", True) is not False:
            raise _form_error(
                "message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"
            )
        return copy.deepcopy(target) if target is not None else None

    def _rest_view(self, msg: dict[str, Any]) -> dict[str, Any]:
        view = copy.deepcopy(msg)
        view.pop("guild_id", None)
        view.pop("member", None)
        return view

    async def _echo(self, event: str, data: dict[str, Any]) -> None:
        if self.echo_own_messages:
            await self._broadcast(event, data, require_session=False)

    async def _post_message(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        channel = self._require_channel(channel_id)
        payload = call.json if isinstance(call.json, dict) else {}
        self._validate_message(payload, call.files)
        referenced = self._resolve_reference(payload, channel_id)
        guild_id = _opt_int(channel.get("guild_id"))
        msg = self._build_message(
            channel_id=channel_id,
            author=self._bot_user(),
            content="",
            guild_id=guild_id,
            member=self._member_payload(self.bot_id, with_user=False) if guild_id else None,
        )
        if referenced is not None:
            self._set_reference(msg, referenced)
        self._apply_payload(msg, payload, call.files, guild_id)
        self._store(msg)
        await self._echo("MESSAGE_CREATE", msg)
        return 200, self._rest_view(msg)

    async def _get_messages(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        self._require_channel(channel_id)
        limit = max(1, min(100, int(call.query.get("limit", "50"))))
        history = self._sorted_history(channel_id)
        if "around" in call.query:
            around = int(call.query["around"])
            index = next((i for i, x in enumerate(history) if int(x["id"]) >= around), len(history))
            start = max(0, index - limit // 2)
            selected = history[start : start + limit]
        elif "after" in call.query:
            after = int(call.query["after"])
            selected = [x for x in history if int(x["id"]) > after][:limit]
        else:
            before = int(call.query.get("before", "0")) or None
            older = [x for x in history if before is None or int(x["id"]) < before]
            selected = older[-limit:]
        return 200, [self._rest_view(x) for x in reversed(selected)]

    async def _get_message(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        self._require_channel(channel_id)
        return 200, self._rest_view(self._require_message(channel_id, int(m["mid"])))

    async def _edit_message(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        channel = self._require_channel(channel_id)
        msg = self._require_message(channel_id, int(m["mid"]))
        if msg["author"]["id"] != str(self.bot_id):
            raise ApiError(403, 50005, "Cannot edit a message authored by another user")
        payload = call.json if isinstance(call.json, dict) else {}
        self._validate_message(payload, call.files, allow_empty=True)
        msg["edited_timestamp"] = _iso()
        guild_id = _opt_int(channel.get("guild_id"))
        self._apply_payload(msg, payload, call.files, guild_id, editing=True)
        await self._echo("MESSAGE_UPDATE", msg)
        return 200, self._rest_view(msg)

    async def _delete_message(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        channel = self._require_channel(channel_id)
        msg = self._require_message(channel_id, int(m["mid"]))
        self._history[channel_id].remove(msg)
        event: dict[str, Any] = {"id": msg["id"], "channel_id": msg["channel_id"]}
        if channel.get("guild_id"):
            event["guild_id"] = channel["guild_id"]
        await self._echo("MESSAGE_DELETE", event)
        return 204, None

    async def _add_reaction(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        self._require_channel(channel_id)
        msg = self._require_message(channel_id, int(m["mid"]))
        emoji = self._parse_emoji(m["emoji"])
        if emoji["id"] is None and not _is_unicode_emoji(emoji["name"]):
            raise ApiError(400, 10014, "Unknown Emoji")
        reactions = msg.setdefault("reactions", [])
        existing = next((r for r in reactions if r["emoji"] == emoji), None)
        if existing is None:
            reactions.append({"emoji": emoji, "count": 1, "me": True})
        elif not existing["me"]:
            existing["count"] += 1
            existing["me"] = True
        return 204, None

    async def _remove_reaction(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel_id = int(m["cid"])
        self._require_channel(channel_id)
        msg = self._require_message(channel_id, int(m["mid"]))
        emoji = self._parse_emoji(m["emoji"])
        for reaction in list(msg.get("reactions", [])):
            if reaction["emoji"] == emoji and reaction["me"]:
                reaction["me"] = False
                reaction["count"] -= 1
                if reaction["count"] <= 0:
                    msg["reactions"].remove(reaction)
        return 204, None

    @staticmethod
    def _parse_emoji(raw: str) -> dict[str, Any]:
        if ":" in raw:
            name, _, emoji_id = raw.partition(":")
            return {"id": emoji_id, "name": name}
        return {"id": None, "name": raw}

    # ------------------------------------------------------------------ REST: webhooks

    @staticmethod
    def _check_webhook_name(name: Any, *, field_name: str = "name") -> None:
        """Discord's rules for webhook names and per-message webhook usernames."""
        if not isinstance(name, str) or not 1 <= len(name) <= 80:
            raise _form_error(
                field_name, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 80 in length."
            )
        lowered = name.lower()
        if any(word in lowered for word in _FORBIDDEN_WEBHOOK_NAMES):
            raise _form_error(
                field_name,
                "WEBHOOK_INVALID_NAME",
                'Webhook names cannot contain "discord" or "clyde"',
            )

    def _create_webhook(
        self,
        channel: dict[str, Any],
        name: str,
        avatar: str | None,
        *,
        application_id: int | None,
        user_id: int,
    ) -> dict[str, Any]:
        webhook_id = self._snowflake()
        webhook = {
            "id": str(webhook_id),
            "type": 1,
            "guild_id": channel["guild_id"],
            "channel_id": channel["id"],
            "user": copy.deepcopy(self._users[user_id]),
            "name": name,
            "avatar": _fake_hash(avatar) if avatar else None,
            "token": secrets.token_urlsafe(48),
            "application_id": _sid(application_id),
        }
        self._webhooks[webhook_id] = webhook
        return webhook

    def _require_manage_webhooks(self) -> None:
        if not self.manage_webhooks:
            raise ApiError(403, 50013, "Missing Permissions")

    def _require_webhook(self, webhook_id: int, token: str | None) -> dict[str, Any]:
        webhook = self._webhooks.get(webhook_id)
        if webhook is None or (token is not None and token != webhook["token"]):
            raise ApiError(404, 10015, "Unknown Webhook")
        return webhook

    async def _get_channel_webhooks(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel = self._require_channel(int(m["cid"]))
        if channel["type"] != CHANNEL_TEXT:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        self._require_manage_webhooks()
        return 200, [
            copy.deepcopy(w) for w in self._webhooks.values() if w["channel_id"] == channel["id"]
        ]

    async def _get_guild_webhooks(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        guild_id = int(m["gid"])
        self._require_guild(guild_id)
        self._require_manage_webhooks()
        return 200, [
            copy.deepcopy(w) for w in self._webhooks.values() if w["guild_id"] == str(guild_id)
        ]

    async def _create_webhook_route(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        channel = self._require_channel(int(m["cid"]))
        if channel["type"] != CHANNEL_TEXT:
            raise ApiError(400, 50024, "Cannot execute action on this channel type")
        self._require_manage_webhooks()
        body = call.json if isinstance(call.json, dict) else {}
        self._check_webhook_name(body.get("name"))
        existing = [w for w in self._webhooks.values() if w["channel_id"] == channel["id"]]
        if len(existing) >= MAX_WEBHOOKS_PER_CHANNEL:
            raise ApiError(
                400, 30007, f"Maximum number of webhooks reached ({MAX_WEBHOOKS_PER_CHANNEL})"
            )
        image = self._avatar_image(body.get("avatar"))
        webhook = self._create_webhook(
            channel,
            body["name"],
            body.get("avatar"),
            application_id=self.application_id,
            user_id=self.bot_id,
        )
        if image is not None:
            self.webhook_avatars[int(webhook["id"])] = image
        return 200, copy.deepcopy(webhook)

    def _avatar_image(self, avatar: object) -> bytes | None:
        """An avatar as Discord takes it: a data URI of a PNG, JPEG, GIF or WebP image."""
        if avatar is None:
            return None
        match = re.match(r"^data:image/(png|jpeg|gif|webp);base64,(.+)$", str(avatar), re.S)
        if match is None:
            raise ApiError(400, 50035, "Invalid Form Body (avatar: not an image data URI)")
        try:
            return base64.b64decode(match.group(2), validate=True)
        except ValueError:
            raise ApiError(400, 50035, "Invalid Form Body (avatar: bad base64)") from None

    async def _get_webhook(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        token = m.get("token")
        webhook = copy.deepcopy(self._require_webhook(int(m["wid"]), token))
        if token is not None:
            webhook.pop("user", None)
        return 200, webhook

    async def _edit_webhook(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        self._require_manage_webhooks()
        webhook = self._require_webhook(int(m["wid"]), None)
        body = call.json if isinstance(call.json, dict) else {}
        if "name" in body:
            self._check_webhook_name(body["name"])
            webhook["name"] = body["name"]
        if "avatar" in body:
            image = self._avatar_image(body["avatar"])
            webhook["avatar"] = _fake_hash(body["avatar"]) if body["avatar"] else None
            if image is not None:
                self.webhook_avatars[int(webhook["id"])] = image
        if "channel_id" in body:
            channel = self._require_channel(int(body["channel_id"]))
            webhook["channel_id"] = channel["id"]
        return 200, copy.deepcopy(webhook)

    async def _delete_webhook(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        token = m.get("token")
        if token is None:
            self._require_manage_webhooks()
        webhook = self._require_webhook(int(m["wid"]), token)
        del self._webhooks[int(webhook["id"])]
        return 204, None

    async def _execute(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        webhook_id = int(m["wid"])
        if webhook_id == self.application_id:
            return await self._followup(call, m["token"])
        webhook = self._require_webhook(webhook_id, m["token"])
        payload = call.json if isinstance(call.json, dict) else {}
        self._validate_message(payload, call.files)
        username = payload.get("username")
        if username is not None:
            self._check_webhook_name(username, field_name="username")
        channel_id = int(webhook["channel_id"])
        thread_id = call.query.get("thread_id")
        if thread_id:
            thread = self._channels.get(int(thread_id))
            if thread is None or thread.get("parent_id") != webhook["channel_id"]:
                raise ApiError(400, 10003, "Unknown Channel")
            channel_id = int(thread_id)
        avatar_url = payload.get("avatar_url")
        author = {
            "id": webhook["id"],
            "username": username or webhook["name"],
            "avatar": _fake_hash(avatar_url) if avatar_url else webhook["avatar"],
            "discriminator": "0000",
            "bot": True,
            "public_flags": 0,
            "flags": 0,
            "global_name": None,
        }
        msg = self._build_message(
            channel_id=channel_id,
            author=author,
            content="",
            guild_id=_opt_int(webhook["guild_id"]),
            member=None,
        )
        msg["webhook_id"] = webhook["id"]
        if webhook.get("application_id"):
            msg["application_id"] = webhook["application_id"]
        self._apply_payload(msg, payload, call.files, _opt_int(webhook["guild_id"]))
        self._store(msg)
        await self._echo("MESSAGE_CREATE", msg)
        if call.query.get("wait", "false").lower() in ("1", "true"):
            return 200, self._rest_view(msg)
        return 204, None

    def _webhook_message(
        self, webhook_id: int, token: str, message_id: str
    ) -> tuple[dict[str, Any], _Interaction | None]:
        if webhook_id == self.application_id:
            interaction = self._interaction_by_token(token)
            if message_id == "@original":
                if interaction.original is None:
                    raise ApiError(404, 10008, "Unknown Message")
                return interaction.original, interaction
            msg = interaction.followups.get(int(message_id))
            if msg is None:
                raise ApiError(404, 10008, "Unknown Message")
            return msg, interaction
        webhook = self._require_webhook(webhook_id, token)
        if message_id == "@original":
            raise ApiError(404, 10008, "Unknown Message")
        for history in self._history.values():
            for msg in history:
                if msg["id"] == message_id and msg.get("webhook_id") == webhook["id"]:
                    return msg, None
        raise ApiError(404, 10008, "Unknown Message")

    async def _get_webhook_message(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        msg, _ = self._webhook_message(int(m["wid"]), m["token"], m["mid"])
        return 200, self._rest_view(msg)

    async def _edit_webhook_message(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        msg, interaction = self._webhook_message(int(m["wid"]), m["token"], m["mid"])
        payload = call.json if isinstance(call.json, dict) else {}
        self._validate_message(payload, call.files, allow_empty=True)
        was_loading = bool(msg["flags"] & FLAG_LOADING)
        msg["flags"] &= ~FLAG_LOADING
        msg["edited_timestamp"] = None if was_loading else _iso()
        guild_id = _opt_int(msg.get("guild_id"))
        self._apply_payload(msg, payload, call.files, guild_id, editing=not was_loading)
        if interaction is None or not msg["flags"] & FLAG_EPHEMERAL:
            await self._echo("MESSAGE_UPDATE", msg)
        return 200, self._rest_view(msg)

    async def _delete_webhook_message(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        msg, interaction = self._webhook_message(int(m["wid"]), m["token"], m["mid"])
        channel_id = int(msg["channel_id"])
        if msg in self._history.get(channel_id, []):
            self._history[channel_id].remove(msg)
        if interaction is not None:
            if interaction.original is msg:
                interaction.original = None
            interaction.followups.pop(int(msg["id"]), None)
        event: dict[str, Any] = {"id": msg["id"], "channel_id": msg["channel_id"]}
        if msg.get("guild_id"):
            event["guild_id"] = msg["guild_id"]
        if not msg["flags"] & FLAG_EPHEMERAL:
            await self._echo("MESSAGE_DELETE", event)
        return 204, None

    # ------------------------------------------------------------------ REST: app commands

    def _check_app(self, m: dict[str, str]) -> int | None:
        if int(m["app"]) != self.application_id:
            raise ApiError(403, 50001, "Missing Access")
        if "gid" in m and m["gid"] is not None:
            guild_id = int(m["gid"])
            self._require_guild(guild_id)
            return guild_id
        return None

    async def _get_commands(self, _call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        scope = self._check_app(m)
        return 200, copy.deepcopy(self.commands.get(scope, []))

    async def _put_commands(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        scope = self._check_app(m)
        body = call.json if isinstance(call.json, list) else None
        if body is None:
            raise ApiError(400, 50035, "Invalid Form Body")
        seen: set[tuple[int, str]] = set()
        previous = {(c["type"], c["name"]): c for c in self.commands.get(scope, [])}
        registered: list[dict[str, Any]] = []
        for index, raw in enumerate(body):
            kind = int(raw.get("type", 1))
            name = raw.get("name", "")
            if kind == 1 and (not _COMMAND_NAME_RE.match(name) or name != name.lower()):
                raise _form_error(
                    str(index), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
                )
            if kind == 1 and not 1 <= len(raw.get("description", "")) <= 100:
                raise _form_error(
                    str(index), "BASE_TYPE_BAD_LENGTH", "Description must be 1-100 characters"
                )
            if (kind, name) in seen:
                raise _form_error(
                    str(index), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Duplicate command name"
                )
            seen.add((kind, name))
            old = previous.get((kind, name))
            command = copy.deepcopy(raw)
            command.update(
                id=old["id"] if old else str(self._snowflake()),
                application_id=str(self.application_id),
                version=str(self._snowflake()),
                type=kind,
                default_member_permissions=raw.get("default_member_permissions"),
                nsfw=bool(raw.get("nsfw", False)),
                description=raw.get("description", ""),
            )
            command.setdefault("options", [])
            if scope is not None:
                command["guild_id"] = str(scope)
            registered.append(command)
        self.commands[scope] = registered
        return 200, copy.deepcopy(registered)

    # ------------------------------------------------------------------ REST: interactions

    def _interaction_by_token(self, token: str) -> _Interaction:
        for interaction in self._interactions.values():
            if interaction.token == token:
                return interaction
        raise ApiError(404, 10015, "Unknown Webhook")

    def _interaction_message(
        self, interaction: _Interaction, payload: dict[str, Any], files: list[tuple[str, bytes]]
    ) -> dict[str, Any]:
        guild_id = interaction.guild_id
        msg = self._build_message(
            channel_id=interaction.channel_id,
            author=self._bot_user(),
            content="",
            guild_id=guild_id,
            member=self._member_payload(self.bot_id, with_user=False) if guild_id else None,
        )
        source = interaction.payload
        user = source["member"]["user"] if "member" in source else source["user"]
        msg.update(
            type=MESSAGE_CHAT_INPUT_COMMAND,
            webhook_id=str(self.application_id),
            application_id=str(self.application_id),
            interaction_metadata={
                "id": str(interaction.id),
                "type": source["type"],
                "user": copy.deepcopy(user),
                "authorizing_integration_owners": copy.deepcopy(
                    source["authorizing_integration_owners"]
                ),
            },
        )
        if source["type"] == INTERACTION_COMMAND:
            msg["interaction_metadata"]["name"] = source["data"]["name"]
        else:
            msg["interaction_metadata"]["interacted_message_id"] = source["message"]["id"]
        self._apply_payload(msg, payload, files, guild_id)
        return msg

    async def _interaction_callback(self, call: RestCall, m: dict[str, str]) -> tuple[int, JSON]:
        interaction = self._interactions.get(int(m["iid"]))
        if interaction is None or interaction.token != m["token"]:
            raise ApiError(404, 10062, "Unknown interaction")
        loop = asyncio.get_running_loop()
        if (
            self.interaction_deadline is not None
            and interaction.callback_type is None
            and loop.time() - interaction.created > self.interaction_deadline
        ):
            raise ApiError(404, 10062, "Unknown interaction")
        if interaction.callback_type is not None:
            raise ApiError(400, 40060, "Interaction has already been acknowledged.")
        body = call.json if isinstance(call.json, dict) else {}
        if "type" not in body:
            raise _form_error("type", "BASE_TYPE_REQUIRED", "This field is required")
        kind = int(body["type"])
        data = body.get("data") or {}
        message: dict[str, Any] | None = None
        if kind == CALLBACK_MESSAGE:
            self._validate_message(data, call.files)
            message = self._interaction_message(interaction, data, call.files)
        elif kind == CALLBACK_DEFERRED_MESSAGE:
            message = self._interaction_message(interaction, {}, [])
            message["flags"] = (int(data.get("flags") or 0) & FLAG_EPHEMERAL) | FLAG_LOADING
        elif kind in (CALLBACK_DEFERRED_UPDATE, CALLBACK_UPDATE_MESSAGE):
            await self._update_pressed_message(interaction, kind, data, call.files)
        interaction.callback_type = kind
        if message is not None:
            interaction.original = message
            if not message["flags"] & FLAG_EPHEMERAL:
                self._store(message)
                await self._echo("MESSAGE_CREATE", message)
        if call.query.get("with_response", "false").lower() not in ("1", "true"):
            return 204, None
        answer: dict[str, Any] = {
            "interaction": {
                "id": str(interaction.id),
                "type": interaction.payload["type"],
                "response_message_loading": kind == CALLBACK_DEFERRED_MESSAGE,
                "response_message_ephemeral": bool(
                    message is not None and message["flags"] & FLAG_EPHEMERAL
                ),
            }
        }
        if message is not None:
            answer["interaction"]["response_message_id"] = message["id"]
            answer["resource"] = {"type": kind, "message": self._rest_view(message)}
        elif kind in (7, 9, 12):
            answer["resource"] = {"type": kind}
        return 200, answer

    async def _update_pressed_message(
        self, interaction: _Interaction, kind: int, data: dict[str, Any], files: list[Any]
    ) -> None:
        """A component's press answered by (deferred) update: only a component interaction
        may, and an update edits the message the component is on."""
        source = interaction.payload
        if source["type"] != INTERACTION_COMPONENT:
            raise ApiError(400, 40043, "Interaction callback type is not valid here")
        if kind != CALLBACK_UPDATE_MESSAGE:
            return
        self._validate_message(data, files, allow_empty=True)
        self._validate_components(data.get("components") or [])
        pressed = self._require_message(interaction.channel_id, int(source["message"]["id"]))
        self._apply_payload(pressed, data, files, interaction.guild_id, editing=True)
        pressed["edited_timestamp"] = _iso()
        await self._echo("MESSAGE_UPDATE", pressed)

    @staticmethod
    def _validate_components(rows: list[dict[str, Any]]) -> None:
        """Discord's rules for buttons: at most five action rows of five, each button with a
        unique custom_id of at most 100 characters and a label of at most 80."""
        if len(rows) > MAX_ACTION_ROWS:
            raise _form_error("components", "BASE_TYPE_MAX_LENGTH", "Must be 5 or fewer in length.")
        seen: set[str] = set()
        for row in rows:
            items = row.get("components") or []
            if row.get("type") != COMPONENT_ACTION_ROW or not 1 <= len(items) <= MAX_ROW_BUTTONS:
                raise _form_error("components", "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "Bad row")
            for item in items:
                custom_id = item.get("custom_id")
                if item.get("type") != COMPONENT_BUTTON:
                    continue
                if custom_id is None or len(custom_id) > MAX_CUSTOM_ID_CHARS or custom_id in seen:
                    raise _form_error(
                        "components", "COMPONENT_CUSTOM_ID_DUPLICATED", "Bad custom_id"
                    )
                if len(item.get("label") or "") > MAX_BUTTON_LABEL_CHARS:
                    raise _form_error("components", "BASE_TYPE_MAX_LENGTH", "Label too long")
                seen.add(custom_id)

    async def _followup(self, call: RestCall, token: str) -> tuple[int, JSON]:
        interaction = self._interaction_by_token(token)
        if interaction.callback_type is None:
            raise ApiError(404, 10015, "Unknown Webhook")
        payload = call.json if isinstance(call.json, dict) else {}
        self._validate_message(payload, call.files)
        msg = self._interaction_message(interaction, payload, call.files)
        interaction.followups[int(msg["id"])] = msg
        if not msg["flags"] & FLAG_EPHEMERAL:
            self._store(msg)
            await self._echo("MESSAGE_CREATE", msg)
        return 200, self._rest_view(msg)
