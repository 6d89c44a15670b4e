"""The boundary types between channels, the dispatcher and the chat loop.

Platform objects stop at the adapter and SDK objects stop at the chat loop: what crosses a
boundary is one of these small frozen dataclasses with string ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

ChatKind = Literal["dm", "group"]


@dataclass(frozen=True)
class ChatRef:
    """A place messages are exchanged: a DM, a group, a channel, a thread or a forum topic."""

    platform: str
    chat_id: str
    kind: ChatKind
    thread_id: str | None = None
    title: str | None = None

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

    @property
    def key(self) -> str:
        return f"{self.platform}:{self.user_id}"


@dataclass(frozen=True)
class Inbound:
    """One message from a platform, after the adapter has decided who and where it is."""

    chat: ChatRef
    sender: Sender
    message_id: str
    text: str
    time: datetime
    addressed: bool = True
    """False for group chatter that does not address the partner: stored as context only."""
    partner_hint: str | None = None
    """A partner id the message names, when several partners are bound to one chat."""
    reply_to_message_id: str | None = None
    attachment: tuple[str, bytes] | None = None
    """A document sent with the message: (file name, content); the text is its caption."""


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
