"""Telegram Desktop's export, ``result.json``, read as Telegram Desktop writes it: one chat
(``name``, ``type``, ``id``, ``messages``) or a whole account's export (its chats under
``chats.list``, the account under ``personal_information``). Of a message, ``text`` is a string
or a list of strings and entities (flattened to their text); service messages (joins, pins,
calls) and messages with no text (a photo alone) are left out. ``--as-user`` names the sender
who is the user (by name or ``from_id``); every other sender is the partner.

An export can be gigabytes, so it is streamed (:mod:`.streaming`) in two reads, neither holding
it whole: the first (:mod:`.telegram_survey`) checks it is JSON within bounds and notes each
chat's name, senders and number of messages, which choose the chat and the user before anything
is stored; the second builds the chosen chat's messages one at a time."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import bot.cli.history_formats.streaming as streaming
from bot.cli.history_formats.messages import BadHistory, Choices, Imported, flat_text
from bot.cli.history_formats.telegram_survey import Chat, Survey, survey
from bot.cli.history_formats.times import BadTime, parse_time

LISTED = 10
"""How many chat or sender names a refusal lists."""


def read(path: Path, choices: Choices) -> Iterator[Imported]:
    export = survey(path)
    chat = _chat(export, choices.chat)
    if not chat.has_messages:
        raise BadHistory(f"{path}: the chat has no 'messages' list; is this a result.json?")
    user = _user_sender(export, chat, choices.as_user)
    conversation = f"telegram:{chat.fields.get('id', chat.fields.get('name', ''))}"
    title = str(chat.fields.get("name") or "")
    for message in _messages(path, export, chat):
        imported = _message(conversation, title, user, message)
        if imported is not None:
            yield imported


def _messages(path: Path, export: Survey, chat: Chat) -> Iterator[Any]:
    """The chosen chat's messages, read again from the file: in a whole export the messages
    of the chats before it come first, and are passed over."""
    prefix = "chats.list.item.messages.item" if export.chats is not None else "messages.item"
    items = streaming.items(path, prefix, export.stamp)
    read = 0
    for message in islice(items, chat.before, chat.before + chat.count):
        read += 1
        yield message
    if read != chat.count:
        raise BadHistory(f"{path}: the file changed while it was read; import it again")


def _chat(export: Survey, wanted: str | None) -> Chat:
    """The chat to import: the file's one chat, or the one ``--chat`` names of a full export."""
    if export.chats is None:
        names = (str(export.top.fields.get("name")), str(export.top.fields.get("id")))
        if wanted is not None and wanted not in names:
            name = export.top.fields.get("name")
            raise BadHistory(f"this export holds one chat, {name!r}, not {wanted!r}")
        return export.top
    listed = export.chats
    if wanted is None and len(listed) == 1:
        return listed[0]
    found = [c for c in listed if wanted in (str(c.fields.get("name")), str(c.fields.get("id")))]
    if len(found) == 1:
        return found[0]
    listing = ", ".join(repr(c.fields.get("name") or c.fields.get("id")) for c in listed[:LISTED])
    what = "say which chat to import" if wanted is None else f"no single chat is {wanted!r}"
    raise BadHistory(f"the export holds {len(listed)} chats: {what} with --chat NAME ({listing})")


def _user_sender(export: Survey, chat: Chat, as_user: str | None) -> tuple[str, str]:
    """The user's ``from_id`` and the user key it becomes."""
    senders = chat.senders
    if as_user is not None:
        found = [i for i, name in senders.items() if as_user in (name, i, i.removeprefix("user"))]
    else:
        found = [f"user{export.user_id}"] if export.has_user_id else []
    if len(found) != 1:
        names = ", ".join(repr(name) for name in list(senders.values())[:LISTED])
        raise BadHistory(f"say which sender is the user with --as-user NAME (senders: {names})")
    sender = found[0]
    key = f"telegram:{sender.removeprefix('user')}" if sender.startswith("user") else None
    return sender, key or senders.get(sender, sender)


def _message(conversation: str, title: str, user: tuple[str, str], message: Any) -> Imported | None:
    if not isinstance(message, dict) or message.get("type") != "message":
        return None
    where = f"message {message.get('id')}"
    try:
        text = flat_text(message.get("text", ""))
        time = parse_time(message.get("date_unixtime") or message.get("date"))
    except (BadTime, ValueError) as exc:
        raise BadHistory(f"{where}: {exc}") from None
    if not text.strip():
        return None
    return Imported(
        conversation=conversation,
        title=title,
        user=user[1],
        role="user" if str(message.get("from_id")) == user[0] else "assistant",
        text=text,
        time=time,
        ident=f"{conversation}:{message.get('id')}",
    )
