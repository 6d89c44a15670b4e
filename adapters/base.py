"""The channel protocol: what the gateway needs from a platform adapter.

An adapter turns platform events into :data:`~bot.events.Event` and hands them to the
gateway (one call per event: addressing, commands and partners are the gateway's); the
gateway hands back :class:`~bot.events.Outbound` chunks and tells a channel what it must know
as a :class:`~bot.events.ChannelView`, pushed when it changes. Splitting a reply into
chunks is the adapter's (it knows the platform's limits); recording which chunk was delivered
is the gateway's, so a restart never sends a confirmed chunk twice.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from bot.events import ChannelView, ChatRef, Event, Outbound


@dataclass(frozen=True)
class TokenCheck:
    """What a platform said about a bot token, for ``companion setup`` and ``doctor``."""

    problem: str | None
    """One line naming what is wrong and the fix; None when the bot can go online."""
    identity: str = ""
    """How the platform shows the bot: "@companion_bot"."""
    username: str | None = None
    """The bot's username, for links (``t.me/<username>``)."""
    notes: tuple[str, ...] = ()
    """Further facts the owner needs: an invite URL, a setting worth knowing."""


class DeliveryError(Exception):
    """A send failed. ``retryable`` says whether trying again may help."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        unreachable: bool = False,
    ):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.unreachable = unreachable
        """The user cannot be written to (blocked the bot, closed DMs): stop writing first."""


class MediaTooBig(Exception):
    """A file is over the platform's download limit (Telegram bots: 20 MB)."""


class NotStored(Exception):
    """The gateway could not store an inbound message (a full disk, a failing database).
    The channel must not confirm it to the platform, so that it is offered again later."""


class ReplyStream(Protocol):
    """A reply shown while the model writes it (a Telegram draft, an edited message)."""

    async def push(self, text: str) -> None:
        """The whole text so far; the stream decides how often to show it (rate limits)."""
        ...

    async def finish(self, first_chunk: str) -> str | None:
        """Stop previewing. Return the platform id of a message that now shows
        ``first_chunk`` in full (it then counts as delivered), or None to have it sent."""
        ...


class Receiver(Protocol):
    """The gateway as a channel sees it: events in; the rest the gateway pushes (a
    :class:`~bot.events.ChannelView`, replies through :class:`Channel`)."""

    async def receive(self, event: Event) -> None:
        """Handle one event: a message (stored and routed), a reaction (context), something
        unreadable (recorded as rejected). An event with an ``update_id`` is handled once and
        recorded after it was. Raises NotStored if it could not be stored: the channel must
        then leave it with the platform, to be offered again."""
        ...

    def note_bot_identity(
        self, platform: str, username: str | None, can_read_groups: bool | None
    ) -> None:
        """What the platform says about the bot itself: its @username (for ``/cmd@bot``) and
        whether it sees every group message (False: privacy mode, only mentions and replies)."""
        ...

    async def last_inbound_at(self, chat: ChatRef) -> float | None:
        """Platform time (epoch seconds) of the newest stored message of ``chat``, if any."""
        ...

    async def stop_turn(self, chat: ChatRef) -> bool:
        """Stop the turn running in ``chat`` at once (it is answered with a short note);
        False if none is running."""
        ...

    async def notify_owner(self, platform: str, text: str) -> None:
        """Tell the owner something they need to act on (a missing permission, ...)."""
        ...


class Channel(Protocol):
    platform: str

    @property
    def connected(self) -> bool:
        """Whether the platform connection is up right now (the health check reads it)."""
        ...

    async def start(self, receiver: Receiver) -> None:
        """Connect and start handing inbound messages to ``receiver``."""
        ...

    async def stop(self) -> None:
        """Disconnect; safe to call twice."""
        ...

    def split(self, text: str) -> list[str]:
        """The reply as the chunks this platform will take, in order."""
        ...

    async def send(self, message: Outbound) -> str | None:
        """Send one chunk; returns the platform's message id. Raises DeliveryError."""
        ...

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        """Show a typing indicator once (the gateway refreshes it while the model works),
        for ``partner_id`` where a partner has an account of its own (Telegram's
        ``[telegram.bots]``)."""
        ...

    async def send_file(
        self, chat: ChatRef, filename: str, data: bytes, caption: str
    ) -> str | None:
        """Send a document (exports, backups); returns the platform's message id."""
        ...

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> ReplyStream | None:
        """A live preview for the next reply in ``chat`` (``partner_id``'s), or None (not
        streaming here)."""
        ...


@runtime_checkable
class FileSource(Protocol):
    """A channel whose platform holds the files sent to it (Telegram, Discord). Inbound
    messages carry them by reference; the gateway fetches one only for a turn or an owner
    command that needs it, never on receipt."""

    max_download_bytes: int

    async def download(self, ref: str) -> bytes:
        """The bytes of a file the platform holds (a file id, an attachment URL). Raises
        MediaTooBig over :attr:`max_download_bytes`, DeliveryError if it cannot be fetched."""
        ...


@runtime_checkable
class MediaChannel(FileSource, Protocol):
    """What a channel offers for voice, images, stickers and reactions (Telegram, Discord).
    A channel without it (the console) answers in text and ignores the rest."""

    caption_limit: int
    """The longest text a voice message carries as its caption."""

    async def send_voice(self, message: Outbound, audio: bytes) -> str | None:
        """Send OGG/Opus audio as a voice message with ``message.text`` as its caption (may
        be empty); returns the platform's message id. Raises DeliveryError."""
        ...

    async def react(
        self, chat: ChatRef, message_id: str, emoji: str, partner_id: str | None = None
    ) -> None:
        """React to a message with one emoji (as ``partner_id``, where it has an account of
        its own); raises DeliveryError (also for an emoji the platform does not allow)."""
        ...

    async def send_sticker(
        self, chat: ChatRef, sticker: str, partner_id: str | None = None
    ) -> str | None:
        """Send a sticker by the platform's id for it. Raises DeliveryError."""
        ...

    async def recording(self, chat: ChatRef, partner_id: str | None = None) -> None:
        """Show that a voice message is being recorded (once; the caller refreshes it)."""
        ...


@runtime_checkable
class LeadingChannel(Protocol):
    """A channel with duties only one worker may do at a time (docs/architecture.md "Several
    workers"):
    Telegram's long poll (two pollers would steal each other's updates) and command sync
    (rate limited). The gateway calls :meth:`lead` when this worker becomes leader and
    :meth:`follow` when it stops leading; a lone worker leads from its start."""

    async def lead(self) -> None:
        """Take up the leader's duties (after :meth:`Channel.start`)."""
        ...

    async def follow(self) -> None:
        """Put them down; sending and (webhook) receiving go on."""
        ...


@runtime_checkable
class ShardedChannel(Protocol):
    """A channel whose platform connection is split into shards, and whose shards the gateway
    may assign (Discord's, when several workers divide the bot among them,
    bot/workers/shards.py)."""

    @property
    def assigned_shards(self) -> int | None:
        """How many shards the bot has when the gateway assigns which of them this process
        connects (:meth:`connect_shards`); None when the channel connects its configured
        shards itself."""
        ...

    @property
    def connected_shards(self) -> list[int]:
        """The shards whose connection is up now."""
        ...

    async def connect_shards(self, shard_ids: Collection[int]) -> None:
        """Connect exactly these shards from now on. When it returns, the shards not named
        are disconnected and nothing they receive reaches the gateway any more; those named
        are connected or connecting."""
        ...


@runtime_checkable
class RefetchingChannel(Protocol):
    """A channel that may hand over a message it already handed over, with no update id to
    tell (Discord fetches what its bound channels said while it was away). The gateway runs a
    command from it at most once per message id; other channels' commands run each time they
    come (a command delivered again answers the same, as ``/forget`` does)."""

    refetches_messages: bool


@runtime_checkable
class OwnerMenuChannel(Protocol):
    """A channel whose command menu shows the owner's commands only to the owner (Telegram:
    a menu per chat), so a new owner must be added to it."""

    async def show_owner_commands(self, user_id: str) -> None:
        """Show the owner's commands in the menu of ``user_id``, who just became an owner.
        A platform's refusal is logged, never raised: the commands work without the menu."""
        ...


@runtime_checkable
class PhotoChannel(Protocol):
    """A channel that shows a partner's picture with an answer (Telegram: bots cannot change
    their own photo per message, so the partner's card in ``/partner`` carries it)."""

    caption_limit: int

    async def send_photo(self, message: Outbound, photo: bytes) -> str | None:
        """Send ``photo`` with ``message.text`` as its caption and ``message.choices`` as its
        buttons; returns the platform's message id. Raises DeliveryError."""
        ...


@runtime_checkable
class ViewChannel(Protocol):
    """A channel that needs to know something of the gateway's state (owners for a command
    menu, bound chats to catch up, chats whose replies name their speaker). The gateway
    pushes a :class:`~bot.events.ChannelView` before :meth:`Channel.start` and again whenever
    it changes; the channel keeps the latest."""

    def set_view(self, view: ChannelView) -> None:
        """Keep ``view`` as what is true from now on (no I/O)."""
        ...
