"""The first read of a Telegram Desktop export (:mod:`.telegram`): the whole file streamed
once, checked to be JSON within bounds (:mod:`.streaming`), and noted down, small whatever the
file's size: each chat's name and id, whether it has a ``messages`` list, where its messages
begin among all the export's and how many there are, and who sent them; and the account's own
``user_id``. The export is never held; a message is held only as the few fields noted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bot.cli.history_formats.streaming as streaming
from bot.cli.history_formats.messages import BadHistory

SCALARS = frozenset(("string", "number", "boolean", "null"))
CHATS = "chats.list.item"
"""Where a whole export's chats are: the items of ``chats.list``."""
ITEMS = frozenset(("messages.item", f"{CHATS}.messages.item"))
"""Where messages are: the one chat's, or each of a whole export's chats'."""
NOTED = ("id", "type", "from", "from_id")
"""What is noted of a message: whose it is, and its id for a refusal to name it."""
PLACES: dict[str, tuple[str, str]] = {
    "personal_information.user_id": ("me", ""),
    "chats.list": ("chats", ""),
    CHATS: ("chat", ""),
    **{f"{chat}{key}": ("field", key) for chat in ("", f"{CHATS}.") for key in ("name", "id")},
    **{f"{chat}messages": ("list", "") for chat in ("", f"{CHATS}.")},
    **{item: ("item", "") for item in ITEMS},
    **{f"{item}.{key}": ("noted", key) for item in ITEMS for key in NOTED},
}
"""The places in the file that are noted, and what each is."""


@dataclass
class Chat:
    """One chat as the first read found it."""

    fields: dict[str, Any] = field(default_factory=dict)
    """Its ``name`` and ``id`` (those present)."""
    has_messages: bool = False
    before: int = 0
    """How many messages of the export come before its own (a whole export's chats' messages
    are read as one run)."""
    count: int = 0
    senders: dict[str, str] = field(default_factory=dict)
    """``from_id`` to name of who sent its messages, in the order they first spoke."""


@dataclass
class Survey:
    """What the first read noted: the file's one chat (``top``) or its chats (``chats``)."""

    stamp: streaming.Stamp
    top: Chat = field(default_factory=Chat)
    chats: list[Chat] | None = None
    has_user_id: bool = False
    user_id: Any = None


def survey(path: Path) -> Survey:
    """The export at ``path`` read through once; :class:`BadHistory` if it cannot be read."""
    with streaming.opened(path) as (source, stamp):
        reading = _Reading(Survey(stamp))
        with streaming.refusals(path, source, reading.where):
            reading.run(streaming.bounded_events(source, ITEMS, PLACES))
        return reading.found


class _Reading:
    """The first read in progress: the chat and the message being read."""

    def __init__(self, found: Survey) -> None:
        self.found = found
        self.chat = found.top
        self.message: dict[str, Any] | None = None
        self.last_id: Any = None
        self.totals: Counter[str] = Counter()

    def where(self) -> str:
        """Where the read is, as a refusal names it."""
        last = self.last_id
        if self.message is None:
            return "before the first message" if last is None else f"after message {last}"
        if "id" in self.message:
            return f"message {self.message['id']}"
        return "the first message" if last is None else f"the message after message {last}"

    def run(self, events: Iterator[streaming.Event]) -> None:
        first = next(events, None)
        if first is None or first[1] != "start_map":
            raise BadHistory("expected Telegram Desktop's result.json (a JSON object)")
        for prefix, kind, value in events:
            place = PLACES.get(prefix)
            if place is None:
                continue
            action, key = place
            if action == "noted":
                if self.message is not None and kind in SCALARS:
                    self.message[key] = value
            elif action == "item":
                self._item(prefix, kind)
            elif action == "field" and kind in SCALARS:
                self.chat.fields[key] = value
            else:
                self._outside(action, prefix, kind, value)

    def _item(self, prefix: str, kind: str) -> None:
        """An event of a message as a whole: where it begins or ends."""
        if kind in streaming.CLOSING:
            if self.message is not None:
                self._noted(self.message)
            self.message = None
            return
        self.chat.count += 1
        self.totals[prefix] += 1
        if kind == "start_map":
            self.message = {}

    def _noted(self, message: dict[str, Any]) -> None:
        self.last_id = message.get("id", self.last_id)
        if message.get("type") == "message" and message.get("from_id"):
            sender = message["from_id"]
            self.chat.senders[str(sender)] = str(message.get("from") or sender)

    def _outside(self, action: str, prefix: str, kind: str, value: Any) -> None:
        """An event around the messages: a chat, its list of messages, the account."""
        found = self.found
        if action == "me" and kind in SCALARS:
            found.has_user_id, found.user_id = True, value
        elif action == "chats" and kind == "start_array" and found.chats is None:
            found.chats = []
        elif action == "chat" and kind == "start_map" and found.chats is not None:
            self.chat = Chat()
            found.chats.append(self.chat)
        elif action == "chat" and kind == "end_map":
            self.chat = found.top
        elif action == "list" and kind == "start_array" and not self.chat.has_messages:
            self.chat.has_messages = True
            self.chat.before = self.totals[f"{prefix}.item"]
