"""The store interface: every read and write of the gateway's database, whatever the backend.

The gateway, the partners and the CLI are written against :class:`Store` and never see SQL or
a driver (importing this package loads none); a backend implements it
(:class:`bot.store.sqlite.SqliteStore`, the embedded default, and
:class:`bot.store.postgres.store.PostgresStore`, which several workers share), and
:func:`bot.store.opening.open_store` opens one. Rows come
back as the types in :mod:`bot.store.rows`; a database that cannot work raises from
:mod:`bot.store.errors`.

:class:`Store` is composed from one protocol per concern, each in a module of this package
named like the modules that implement it on either backend: the messages concern is
:class:`bot.store.protocol.messages.MessagesStore`, implemented in :mod:`bot.store.messages`
and :mod:`bot.store.postgres.messages`. A new method goes into its concern's protocol and
both of its implementations; what concerns the database as a whole (closing, its
schema version, a backup) stays here. Most of a concern's SQL is written once for both
backends (:mod:`bot.store.base`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from bot.store.protocol.audit import AuditStore
from bot.store.protocol.chats import ChatsStore
from bot.store.protocol.checkins import CheckinsStore
from bot.store.protocol.confirmations import ConfirmationsStore
from bot.store.protocol.documents import DocumentsStore
from bot.store.protocol.forgetting import ForgettingStore
from bot.store.protocol.media import MediaStore
from bot.store.protocol.messages import MessagesStore
from bot.store.protocol.queue import QueueStore
from bot.store.protocol.review import ReviewStore
from bot.store.protocol.search import SearchStore
from bot.store.protocol.sessions import SessionsStore
from bot.store.protocol.tool_calls import ToolCallsStore
from bot.store.protocol.turn_context import TurnContextStore
from bot.store.protocol.usage import UsageStore
from bot.store.protocol.users import UsersStore
from bot.store.protocol.vectors import VectorsStore
from bot.store.protocol.web import WebStore
from bot.store.protocol.workers import WorkersStore


class Store(
    UsersStore,
    ChatsStore,
    MessagesStore,
    QueueStore,
    TurnContextStore,
    MediaStore,
    SessionsStore,
    ReviewStore,
    SearchStore,
    ForgettingStore,
    CheckinsStore,
    UsageStore,
    AuditStore,
    VectorsStore,
    WebStore,
    WorkersStore,
    ToolCallsStore,
    ConfirmationsStore,
    DocumentsStore,
    Protocol,
):
    """The gateway's database: users and chats, messages and their search index, the work
    queue, sessions and review state, forget operations, usage and the audit log."""

    async def close(self) -> None: ...

    async def schema_version(self) -> int:
        """How many schema steps the database has applied."""

    async def backup_to(self, target: Path) -> None:
        """A consistent copy of the live database in the file ``target`` (SQLite; PostgreSQL
        raises :class:`StoreError` saying to use pg_dump)."""
