"""The boundary types between channels, the dispatcher and the chat loop.

Platform objects stop at the adapter and SDK objects stop at the chat loop: what crosses a
boundary is one of these small frozen dataclasses with string ids.

What a platform hands in is cleaned as it becomes one of these: a surrogate code point (half of
an emoji whose ``\ud83d`` JSON escape lost its other half, or a byte the console read with
Python's ``surrogateescape``) cannot be encoded as UTF-8, so no database or file could take the
message, and its sender could never be served. Every text an inbound message carries (text,
caption, names, username, title, file names) is therefore made storable at construction.

Files come by reference (:class:`Media`, :class:`Attachment`): a channel never downloads on
receipt, so nothing is fetched for a message the gateway will not serve.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

ChatKind = Literal["dm", "group"]
MediaKind = Literal["voice", "photo"]

SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` as UTF-8 can hold it: a surrogate pair becomes the character it stands for, a
    lone surrogate becomes U+FFFD. Text without surrogates is returned as it is."""
    if SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _make_storable(instance: DataclassInstance) -> None:
    """Clean every text field of a frozen dataclass as it is built (its ``__post_init__``)."""
    for item in fields(instance):
        value = getattr(instance, item.name)
        if isinstance(value, str) and SURROGATE.search(value) is not None:
            object.__setattr__(instance, item.name, storable(value))
        elif isinstance(value, tuple) and any(isinstance(v, str) for v in value):
            cleaned = tuple(storable(v) if isinstance(v, str) else v for v in value)
            object.__setattr__(instance, item.name, cleaned)


@dataclass(frozen=True)
class ChatRef:
    """A place messages are exchanged: a DM, a group, a channel, a thread or a forum topic."""

    platform: str
    chat_id: str
    kind: ChatKind
    thread_id: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        _make_storable(self)

    @property
    def key(self) -> str:
        """One session queue per key: a forum topic or a thread is its own conversation."""
        base = f"{self.platform}:{self.chat_id}"
        return f"{base}:{self.thread_id}" if self.thread_id else base

    @property
    def group_key(self) -> str:
        """The whole chat, topics included: a group's history is visible to all its topics."""
        return f"{self.platform}:{self.chat_id}"

    @property
    def is_dm(self) -> bool:
        return self.kind == "dm"


@dataclass(frozen=True)
class Sender:
    platform: str
    user_id: str
    display_name: str
    username: str | None = None

    def __post_init__(self) -> None:
        _make_storable(self)

    @property
    def key(self) -> str:
        return f"{self.platform}:{self.user_id}"


@dataclass(frozen=True)
class Media:
    """A voice note or photo that came with a message, by reference: the platform's file id
    (Telegram) or attachment URL (Discord). Its bytes are fetched when a turn needs them."""

    kind: MediaKind
    ref: str
    mime: str | None = None
    seconds: float | None = None
    """A voice note's length, as the platform reports it."""
    size: int | None = None
    """Bytes, as the platform reports them."""
    filename: str | None = None

    def __post_init__(self) -> None:
        _make_storable(self)


@dataclass(frozen=True)
class Attachment:
    """A document that came with a message, by reference: the platform's file id (Telegram)
    or attachment URL (Discord), never its bytes. Only an owner command that reads it fetches
    it (``bot/admin/args.py``), after the gateway has decided who sent it: a file from anyone
    else is never downloaded, whatever its caption says."""

    filename: str
    ref: str
    size: int | None = None
    """Bytes, as the platform reports them (a limit is checked before anything is fetched)."""

    def __post_init__(self) -> None:
        _make_storable(self)


@dataclass(frozen=True)
class Inbound:
    """One message from a platform, as the adapter saw it: where, who, the text, and the facts
    only the platform knows (a mention, a reply to the bot, files by reference). Whether it
    addresses a partner, whether it is a command and which partner it is for, the gateway
    decides (``bot/gateway/addressing.py``)."""

    chat: ChatRef
    sender: Sender
    message_id: str
    text: str
    time: datetime
    mentioned: bool = False
    """The bot was @mentioned (or pressed: a button on one of its messages, a slash command)."""
    replied_to_bot: bool = False
    """A reply to one of the bot's own messages (a persona webhook's included)."""
    replied_as: str | None = None
    """The name the answered message of the bot went out under (a persona webhook's name)."""
    addressed_partners: tuple[str, ...] = ()
    """Partners whose own bot account the message @mentions or replies to (Telegram's
    ``[telegram.bots]``), by partner id, in the order met."""
    late: bool = False
    """Fetched after a reconnect and too old to answer: kept as context, never run as a
    command."""
    update_id: str | None = None
    """The platform's id of this delivery (Telegram's update id): handled once, however
    often it comes."""
    reply_to_message_id: str | None = None
    attachment: Attachment | None = None
    """A document sent with the message, by reference (an owner command reads it); the text
    is its caption."""
    media: Media | None = None
    """A voice note or photo sent with the message; the text is its caption (or empty)."""
    file_names: tuple[str, ...] = ()
    """Files that came along which nobody reads (a zip, a PDF): a conversation names them."""

    def __post_init__(self) -> None:
        _make_storable(self)


@dataclass(frozen=True)
class Reaction:
    """A user set an emoji reaction on a message (``message_id``, the platform's id)."""

    chat: ChatRef
    sender: Sender
    message_id: str
    emoji: str
    time: datetime
    update_id: str | None = None

    def __post_init__(self) -> None:
        _make_storable(self)


@dataclass(frozen=True)
class Unsupported:
    """A message with nothing the gateway can read (a file without a caption, a video)."""

    chat: ChatRef
    message_id: str
    update_id: str | None = None
    late: bool = False


@dataclass(frozen=True)
class Unreadable:
    """An update the channel could not parse at all: recorded as seen (skipped if it comes
    again) and as rejected (so it can be found)."""

    platform: str
    update_id: str


Event = Inbound | Reaction | Unsupported | Unreadable
"""What a channel hands the gateway (:meth:`adapters.base.Receiver.receive`)."""


@dataclass(frozen=True)
class ChannelView:
    """What the gateway tells a channel, pushed at start and whenever it changes; the channel
    keeps the latest and never asks per message or per send."""

    owners: tuple[str, ...] = ()
    """The owners' user ids on this platform (config.toml's and those who claimed the bot)."""
    bound_chats: tuple[str, ...] = ()
    """Ids of the group chats with a partner bound (missed messages are fetched there)."""
    shared_chats: frozenset[str] = frozenset()
    """Ids of the group chats with several partners bound: a reply there says who speaks."""
    partners: tuple[tuple[str, str], ...] = ()
    """(id, name) of the partners anyone may pick with ``/partner``."""


@dataclass(frozen=True)
class Choice:
    """A button that sends ``command`` as if the user had typed it (where buttons exist)."""

    label: str
    command: str


@dataclass(frozen=True)
class Outbound:
    """One reply for a channel to deliver."""

    chat: ChatRef
    text: str
    reply_to_message_id: str | None = None
    partner_id: str | None = None
    partner_name: str | None = None
    choices: tuple[Choice, ...] = ()
    partner_avatar: str | None = None
    """The partner's avatar (preset.yml ``avatar``), for platforms that show one per message."""
    partner_avatar_image: bytes | None = None
    """The partner's avatar.png, for platforms that take an image rather than a URL (Discord
    webhooks: ``adapters/discord_delivery.py``)."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class Turn:
    """The outcome of one turn: the reply and what it took."""

    session_id: str
    partner_id: str | None
    reply: str
    tool_calls: tuple[ToolCall, ...] = field(default_factory=tuple)
    usage: Usage = Usage()
    failed: bool = False
