"""What every history reader makes and shares: :class:`Imported` messages, the
command line's :class:`Choices`, :class:`BadHistory`, Telegram-style text flattened, and whose
a history's messages are (:func:`user_of`, :func:`audience_of`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

OWNER = "owner"
"""The user name that stands for the owner: what the partner recalls in the owner's chats
(the console's, and the owner's DMs). A history whose file does not say who the user was
(ChatGPT's) is the owner's."""
OWNER_KEY = "console:console"
"""The owner's user key, as the console knows them."""


class BadHistory(ValueError):
    """A history file that cannot be imported, with where and what to do."""


@dataclass(frozen=True)
class Imported:
    """One message of an imported history, as the store will keep it."""

    conversation: str
    """What groups messages into one session; the same for each import of one file."""
    title: str
    """The conversation's title ("" for its first message's text)."""
    user: str
    """Who spoke with the partner: a user key ("telegram:5") or a name."""
    role: str
    """``user`` or ``assistant`` (the partner)."""
    text: str
    time: float
    ident: str
    """Stable per source message: importing the file again adds nothing twice."""


@dataclass(frozen=True)
class Choices:
    """What the command line says about a file: who is the user, which chat of several."""

    as_user: str | None = None
    chat: str | None = None


def flat_text(value: Any) -> str:
    """Text as Telegram writes it, a string or a list of strings and entities
    (``{"type": "bold", "text": "…"}``), as plain text; :class:`ValueError` for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_entity_text(part) for part in value)
    raise ValueError(f"text must be a string or a list of text parts, not {type(value).__name__}")


def _entity_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return str(part["text"])
    raise ValueError("a text part must be a string or an object with a 'text' string")


def user_of(name: str) -> str:
    """The user key a history's user name stands for: a key as it is, the owner's for
    :data:`OWNER`, any other name under ``import:``."""
    if name == OWNER:
        return OWNER_KEY
    return name if ":" in name else f"import:{name}"


def audience_of(name: str) -> str:
    """Who may be reminded of a history's messages: the owner's are the owner's, any other
    user's that user's."""
    return "owner" if name == OWNER else f"user:{user_of(name)}"


def json_object(number: int, line: str) -> dict[str, Any]:
    """Line ``number`` of a JSON-lines file as the object it must hold."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadHistory(f"line {number}: not JSON ({exc.msg})") from exc
    if not isinstance(record, dict):
        raise BadHistory(f"line {number}: expected a JSON object")
    return record
