"""Tombstones: what keeps forgotten text from coming back.

A forget operation (:mod:`partners.forgetting`) leaves a hash of each forgotten text
(:func:`partners.memory_format.text_hash`), kept by the store under the partner and a key — the
user's key for what a user forgot, ``file:<name>`` for an entry the owner forgot from one file with
``/admin forget`` (partner "" for the owner's own memory). Here they are read the way each door
through which old text could come back needs them: a memory document read into the database
(:meth:`Tombstones.strip`) and an imported history (:func:`unforgotten`). A hash matches a whole
entry or a whole message, never a passage inside a longer text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.store import NewMessage, Store
from partners.memory_format import BOM, BULLET, ENTRY_ID, text_hash
from partners.tools import user_memory_name

FILE_KEY = "file:"
"""The tombstone key of an entry the owner forgot from one file: ``file:<name>``."""


def file_key(name: str) -> str:
    return f"{FILE_KEY}{name}"


def namespace_partner(namespace: str) -> str:
    """Whose tombstones a namespace's documents check: the partner's id, "" for the owner's."""
    return namespace.removeprefix("partners/") if namespace.startswith("partners/") else ""


@dataclass(frozen=True)
class Tombstones:
    """The tombstones of one partner (or of the owner's memory), hashes by key, as
    :meth:`bot.store.protocol.forgetting.ForgettingStore.partner_tombstones` gives them."""

    by_key: dict[str, set[str]]

    def of_document(self, name: str) -> set[str]:
        """The hashes of what was forgotten from the document ``name``: the owner's
        ``/admin forget`` of it, and for a per-user file what its user forgot."""
        found = set(self.by_key.get(file_key(name), set()))
        if name.startswith("users/"):
            for key, hashes in self.by_key.items():
                if not key.startswith(FILE_KEY) and _user_file_name(key) == name:
                    found |= hashes
        return found

    def strip(self, name: str, data: bytes) -> bytes:
        """The document's bytes without its forgotten entries (each such line left out,
        every other byte as it was)."""
        hashes = self.of_document(name)
        return without_entries(data, hashes) if hashes else data


def _user_file_name(user_key: str) -> str | None:
    try:
        return user_memory_name(user_key)
    except ValueError:  # a key no file can be named after has no file
        return None


def without_entries(data: bytes, hashes: set[str]) -> bytes:
    """``data`` without the entry lines (list items) whose text hashes to one of ``hashes``."""
    bom = BOM.encode() if data.startswith(BOM.encode()) else b""
    lines = data[len(bom) :].splitlines(keepends=True)
    return bom + b"".join(line for line in lines if not _forgotten_line(line, hashes))


def _forgotten_line(line: bytes, hashes: set[str]) -> bool:
    match = BULLET.match(line.decode("utf-8", errors="replace").rstrip("\r\n"))
    if match is None:
        return False
    text = ENTRY_ID.sub("", match.group(2)).strip()
    return bool(text) and text_hash(text) in hashes


async def unforgotten(store: Store, messages: Sequence[NewMessage]) -> list[NewMessage]:
    """The messages to store of an imported history: without those a tombstone of their user
    matches (``/forget history`` left one for each message it removed)."""
    known: dict[tuple[str, str], set[str]] = {}
    kept = []
    for message in messages:
        forgotten: set[str] = set()
        for user in _users_of(message):
            key = (message.partner_id or "", user)
            if key not in known:
                known[key] = await store.tombstones(*key)
            forgotten |= known[key]
        if not forgotten or text_hash(message.text) not in forgotten:
            kept.append(message)
    return kept


def _users_of(message: NewMessage) -> set[str]:
    """Whose forgetting a message falls under, as ``/forget history`` finds it: its sender's,
    and in a DM (the partner's replies too) that user's."""
    users = {message.user_key} if message.user_key else set()
    if message.audience.startswith("user:"):
        users.add(message.audience.removeprefix("user:"))
    return users
