"""Telegram Desktop's export, ``result.json``, read as Telegram Desktop writes it: one chat
(``name``, ``type``, ``id``, ``messages``) or a whole account's export (its chats under
``chats.list``, the account under ``personal_information``). Of a message, ``text`` is a string
or a list of strings and entities (flattened to their text); service messages (joins, pins,
calls) and messages with no text (a photo alone) are left out. ``--as-user`` names the sender
who is the user (by name or ``from_id``); every other sender is the partner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bot.cli.history_formats.messages import BadHistory, Choices, Imported, flat_text
from bot.cli.history_formats.times import BadTime, parse_time

LISTED = 10
"""How many chat or sender names a refusal lists."""


def read(path: Path, choices: Choices) -> Iterator[Imported]:
    export = _load(path)
    chat = _chat(export, choices.chat)
    messages = chat.get("messages")
    if not isinstance(messages, list):
        raise BadHistory(f"{path}: the chat has no 'messages' list; is this a result.json?")
    user = _user_sender(export, messages, choices.as_user)
    conversation = f"telegram:{chat.get('id', chat.get('name', ''))}"
    for message in messages:
        imported = _message(conversation, str(chat.get("name") or ""), user, message)
        if imported is not None:
            yield imported


def _load(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8-sig") as file:
            export = json.load(file)
    except json.JSONDecodeError as exc:
        raise BadHistory(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(export, dict):
        raise BadHistory(f"{path}: expected Telegram Desktop's result.json (a JSON object)")
    return export


def _chat(export: dict[str, Any], wanted: str | None) -> dict[str, Any]:
    """The chat to import: the file's one chat, or the one ``--chat`` names of a full export."""
    chats = export.get("chats")
    if not isinstance(chats, dict) or not isinstance(chats.get("list"), list):
        if wanted is not None and wanted not in (str(export.get("name")), str(export.get("id"))):
            raise BadHistory(f"this export holds one chat, {export.get('name')!r}, not {wanted!r}")
        return export
    listed = [c for c in chats["list"] if isinstance(c, dict)]
    if wanted is None and len(listed) == 1:
        return listed[0]
    found = [c for c in listed if wanted in (str(c.get("name")), str(c.get("id")))]
    if len(found) == 1:
        return found[0]
    names = ", ".join(repr(c.get("name") or c.get("id")) for c in listed[:LISTED])
    what = "say which chat to import" if wanted is None else f"no single chat is {wanted!r}"
    raise BadHistory(f"the export holds {len(listed)} chats: {what} with --chat NAME ({names})")


def _user_sender(
    export: dict[str, Any], messages: list[Any], as_user: str | None
) -> tuple[str, str]:
    """The user's ``from_id`` and the user key it becomes."""
    senders = {
        str(m.get("from_id")): str(m.get("from") or m.get("from_id"))
        for m in messages
        if isinstance(m, dict) and m.get("type") == "message" and m.get("from_id")
    }
    if as_user is not None:
        found = [i for i, name in senders.items() if as_user in (name, i, i.removeprefix("user"))]
    else:
        me = export.get("personal_information")
        found = [f"user{me['user_id']}"] if isinstance(me, dict) and "user_id" in me else []
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
