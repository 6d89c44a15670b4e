"""The gateway's database, and all of its SQL.

A newcomer's map:
- :mod:`bot.store.protocol` — :class:`Store`, the interface the rest of the code is written
  against, composed from one protocol per concern (below); importing it loads no driver.
- :mod:`bot.store.opening` — ``await open_store(path_or_url)`` opens the database.
- :mod:`bot.store.base` — the primitives every concern's SQL runs through, written once for
  both backends (``?`` parameters, numbered for PostgreSQL).
- :mod:`bot.store.rows` — the typed rows its methods take and return (conversations; beside it
  ``search_rows``, ``admin_rows``, ``worker_rows``).
- :mod:`bot.store.errors` — :class:`StoreUnavailable` and its family, the only database errors
  that leave the store.
- :mod:`bot.store.migrations` — the versioned migrations, one module per step
  (``step_01_core_tables.py`` …), each spelling the text SQLite and PostgreSQL run.
- :mod:`bot.store.search_terms` — search text normalised and tokenised in Python (folding,
  stems, CJK bigrams), so every backend indexes the same terms.
- :mod:`bot.store.searchable` — what search is on every backend before any SQL: which
  messages are searchable, audience tokens, each partner's search language and its terms.
- :mod:`bot.store.sqlite` — the SQLite backend, on ``connection`` (aiosqlite, the write lock,
  error translation); :mod:`bot.store.postgres` — the PostgreSQL backend, on ``postgres.base``
  (the pool, round trips counted). Each is composed from one class per concern.

Each concern has one name: its interface is ``bot/store/protocol/<name>.py`` and its SQL
``bot/store/<name>.py``, written once for both backends where it is (``users``, ``chats``,
``sessions``, ``media``, ``checkins``, ``usage``, ``audit``, ``web``, ``documents``), with
``bot/store/postgres/<name>.py`` holding only what PostgreSQL says otherwise; the other concerns
still have a SQLite body there and a PostgreSQL one in ``bot/store/postgres/``
(tests/test_store_written_once.py lists what is left). The concerns: ``users`` (users, pairings,
owner claims), ``chats`` (chats, bindings), ``messages``, ``queue`` (pending turns and delivery),
``turn_context`` (what a turn reads first, in one round trip), ``media``, ``sessions``, ``review``
(review state), ``search``, ``forgetting``, ``checkins`` (and reminders), ``usage`` (and budgets),
``audit`` (and settings), ``vectors`` (semantic recall), ``web`` (the web page's logins),
``workers`` (the worker registry, the leader and queue-key leases with fencing epochs),
``shard_leases`` (the Discord bot's shards, leased the same way; its interface is part of
``protocol/workers.py``), ``documents`` (memory documents as rows, when they are not files).

The dispatcher's queue is rows in ``messages`` (``status = 'pending'``), not only memory, so
restart recovery is a query and a second backend can offer failover with the same code path.
"""

from bot.store.admin_rows import (
    AuditRow,
    BindingRow,
    CheckinCandidate,
    CheckinSetting,
    ClaimedOwnerRow,
    PairingRow,
    ReminderRow,
    RestNoticeRow,
    UsageRow,
    UserRow,
)
from bot.store.errors import LeaseLost, StoreError, StoreFull, StoreUnavailable
from bot.store.leases import review_key, reviewed_session
from bot.store.migrations import SCHEMA, Dialects, Migration, for_dialect
from bot.store.protocol import Store
from bot.store.rows import (
    ChatRow,
    ConfirmationRow,
    DeliveryRetry,
    DocumentRow,
    ForgetOperation,
    MediaRow,
    MessageRow,
    NewMedia,
    NewMessage,
    NewToolCall,
    NewUsage,
    SessionRow,
    ToolCallRow,
    TurnContext,
    WaitingReply,
    new_session_id,
)
from bot.store.search_rows import EmbeddingWork, NewVector, SearchHit, StoredVector, VectorChanges
from bot.store.worker_rows import Leader, Lease, ShardLease, WorkerRow

__all__ = [
    "SCHEMA",
    "AuditRow",
    "BindingRow",
    "ChatRow",
    "ConfirmationRow",
    "CheckinCandidate",
    "CheckinSetting",
    "ClaimedOwnerRow",
    "Dialects",
    "DeliveryRetry",
    "DocumentRow",
    "EmbeddingWork",
    "ForgetOperation",
    "Leader",
    "Lease",
    "LeaseLost",
    "review_key",
    "reviewed_session",
    "MediaRow",
    "MessageRow",
    "Migration",
    "NewMedia",
    "NewMessage",
    "NewToolCall",
    "NewUsage",
    "NewVector",
    "PairingRow",
    "ReminderRow",
    "RestNoticeRow",
    "SearchHit",
    "SessionRow",
    "ShardLease",
    "Store",
    "StoreError",
    "StoreFull",
    "StoreUnavailable",
    "StoredVector",
    "ToolCallRow",
    "TurnContext",
    "UsageRow",
    "UserRow",
    "VectorChanges",
    "WaitingReply",
    "WorkerRow",
    "for_dialect",
    "new_session_id",
]
