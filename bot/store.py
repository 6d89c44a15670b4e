"""The gateway's database: users, chats, bindings, sessions, messages and their search index,
the work queue, review state, forget operations, usage and the audit log. All SQL of the
project lives here.

:class:`Store` is the interface the rest of the code sees; this SQLite implementation (WAL,
versioned migrations applied at open) is the embedded default. The dispatcher's queue is rows
in ``messages`` (``status = 'pending'``), not only memory, so restart recovery is a query and a
second backend can offer failover with the same code path.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiosqlite

from bot.search_terms import DEFAULT_LANGUAGE, index_terms, match_expression


@dataclass(frozen=True)
class Migration:
    """A schema step whose data must be recomputed in Python (search terms are made there):
    ``sql`` runs first, then the Store method named ``then``, then ``after`` (SQL that needs
    the recomputed data, such as a new index and its triggers), in one transaction."""

    sql: str
    then: str
    after: str = ""


SCHEMA: list[str | Migration] = [
    # 1: the core tables
    """
    CREATE TABLE users (
        user_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        platform_user_id TEXT NOT NULL,
        display_name TEXT NOT NULL DEFAULT '',
        username TEXT,
        access TEXT NOT NULL DEFAULT 'unknown',
        timezone TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE chats (
        chat_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        platform_chat_id TEXT NOT NULL,
        thread_id TEXT,
        kind TEXT NOT NULL,
        title TEXT,
        selected_partner TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE bindings (
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        partner_id TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (platform, chat_id, partner_id)
    );
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        partner_id TEXT,
        chat_key TEXT NOT NULL,
        user_key TEXT,
        audience TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'chat',
        carry_from TEXT,
        title TEXT NOT NULL DEFAULT '',
        system_prompt TEXT NOT NULL,
        created_at REAL NOT NULL,
        last_active_at REAL NOT NULL,
        ended_at REAL,
        end_reason TEXT,
        reviewed_upto INTEGER NOT NULL DEFAULT 0,
        review_attempts INTEGER NOT NULL DEFAULT 0,
        review_error TEXT,
        review_due_at REAL
    );
    CREATE INDEX sessions_review_due ON sessions (review_due_at)
        WHERE review_due_at IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (chat_key, partner_id) WHERE ended_at IS NULL;
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        dedup_key TEXT UNIQUE,
        queue_key TEXT,
        session_id TEXT,
        partner_id TEXT,
        chat_key TEXT NOT NULL,
        platform_message_id TEXT,
        user_key TEXT,
        speaker TEXT NOT NULL DEFAULT '',
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        audience TEXT NOT NULL,
        status TEXT NOT NULL,
        answers_upto INTEGER,
        created_at REAL NOT NULL,
        terms TEXT,
        scope TEXT
    );
    CREATE INDEX messages_pending ON messages (queue_key, id) WHERE status = 'pending';
    CREATE INDEX messages_delivering ON messages (id) WHERE status = 'delivering';
    CREATE INDEX messages_session ON messages (session_id, id);
    CREATE INDEX messages_chat ON messages (chat_key, id);
    CREATE VIRTUAL TABLE message_index USING fts5(
        terms, scope, content = 'messages', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER messages_indexed AFTER INSERT ON messages WHEN new.terms IS NOT NULL BEGIN
        INSERT INTO message_index (rowid, terms, scope) VALUES (new.id, new.terms, new.scope);
    END;
    CREATE TRIGGER messages_unindexed AFTER DELETE ON messages WHEN old.terms IS NOT NULL BEGIN
        INSERT INTO message_index (message_index, rowid, terms, scope)
        VALUES ('delete', old.id, old.terms, old.scope);
    END;
    CREATE TABLE deliveries (
        message_id INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        platform_message_id TEXT,
        sent_at REAL NOT NULL,
        PRIMARY KEY (message_id, chunk)
    );
    CREATE TABLE seen_updates (
        platform TEXT NOT NULL,
        update_id TEXT NOT NULL,
        seen_at REAL NOT NULL,
        PRIMARY KEY (platform, update_id)
    );
    CREATE TABLE usage (
        day TEXT NOT NULL,
        partner_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        model TEXT NOT NULL,
        calls INTEGER NOT NULL DEFAULT 0,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (day, partner_id, kind, model)
    );
    CREATE TABLE audit (
        id INTEGER PRIMARY KEY,
        time REAL NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE TABLE pairing_requests (
        code TEXT PRIMARY KEY,
        user_key TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
    );
    CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    """,
    # 2: what users asked to forget, check-ins and dated reminders
    """
    CREATE TABLE tombstones (
        partner_id TEXT NOT NULL,
        user_key TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (partner_id, user_key, text_hash)
    );
    CREATE TABLE checkins (
        partner_id TEXT NOT NULL,
        user_key TEXT NOT NULL,
        enabled INTEGER NOT NULL DEFAULT 0,
        unanswered INTEGER NOT NULL DEFAULT 0,
        last_sent_at REAL,
        disabled_reason TEXT,
        PRIMARY KEY (partner_id, user_key)
    );
    CREATE TABLE checkin_log (
        id INTEGER PRIMARY KEY,
        partner_id TEXT NOT NULL,
        user_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        sent_at REAL NOT NULL,
        silent INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX checkin_log_user ON checkin_log (partner_id, user_key, sent_at);
    CREATE INDEX messages_user ON messages (user_key, partner_id, created_at);
    CREATE TABLE reminders (
        id INTEGER PRIMARY KEY,
        partner_id TEXT NOT NULL,
        user_key TEXT NOT NULL,
        due_date TEXT NOT NULL,
        about TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        created_at REAL NOT NULL,
        UNIQUE (partner_id, user_key, due_date, about)
    );
    """,
    # 3: owner administration: referenced transcripts, "resting" notices, review times
    """
    CREATE TABLE transcript_refs (
        session_id TEXT NOT NULL,
        referenced_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (session_id, referenced_id)
    );
    CREATE TABLE rest_notices (
        kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        sent_at REAL NOT NULL,
        PRIMARY KEY (kind, subject)
    );
    CREATE INDEX messages_user_time ON messages (user_key, created_at);
    ALTER TABLE sessions ADD COLUMN reviewed_at REAL;
    """,
    # 4: platform updates the gateway could not read are recorded as rejected
    """
    ALTER TABLE seen_updates ADD COLUMN status TEXT NOT NULL DEFAULT 'handled';
    """,
    # 5: nothing stays pending forever: failed turn attempts per inbound message
    """
    ALTER TABLE messages ADD COLUMN turn_attempts INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: replies the platform refused for now, with their next attempt; a row lives only
    # while its reply is being delivered
    """
    CREATE TABLE delivery_retries (
        message_id INTEGER PRIMARY KEY,
        attempts INTEGER NOT NULL,
        first_failed_at REAL NOT NULL,
        next_attempt_at REAL NOT NULL,
        last_error TEXT NOT NULL
    );
    CREATE INDEX delivery_retries_due ON delivery_retries (next_attempt_at);
    CREATE TRIGGER delivery_retry_settled AFTER UPDATE OF status ON messages
    WHEN old.status = 'delivering' AND new.status != 'delivering' BEGIN
        DELETE FROM delivery_retries WHERE message_id = new.id;
    END;
    CREATE TRIGGER delivery_retry_removed AFTER DELETE ON messages
    WHEN old.status = 'delivering' BEGIN
        DELETE FROM delivery_retries WHERE message_id = old.id;
    END;
    """,
    # 7: forgetting as a recorded operation: the intent first, then idempotent steps
    """
    CREATE TABLE forget_operations (
        id INTEGER PRIMARY KEY,
        request TEXT UNIQUE,
        partner_id TEXT NOT NULL,
        user_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        entry_ids TEXT NOT NULL,
        hashes TEXT NOT NULL,
        texts TEXT,
        session_ids TEXT NOT NULL,
        entries INTEGER NOT NULL,
        passages INTEGER NOT NULL,
        messages INTEGER NOT NULL,
        status TEXT NOT NULL DEFAULT 'running',
        created_at REAL NOT NULL,
        finished_at REAL
    );
    CREATE INDEX forget_operations_open ON forget_operations (partner_id, user_key)
        WHERE status != 'done';
    """,
    # 8: stemmed search terms in each partner's language; every message re-indexed
    Migration(
        """
        CREATE TABLE search_languages (
            partner_id TEXT PRIMARY KEY,
            language TEXT NOT NULL
        );
        CREATE TRIGGER messages_reindexed AFTER UPDATE OF terms ON messages BEGIN
            INSERT INTO message_index (message_index, rowid, terms, scope)
            SELECT 'delete', old.id, old.terms, old.scope WHERE old.terms IS NOT NULL;
            INSERT INTO message_index (rowid, terms, scope)
            SELECT new.id, new.terms, new.scope WHERE new.terms IS NOT NULL;
        END;
        """,
        then="_recompute_search_terms",
    ),
    # 9: neighbour context: each conversation message is also indexed with the terms of the
    # message before and after it in the same thread (chat, partner and audience: so a
    # neighbour is always one the same people may see), in lower-weighted columns. The
    # columns are filled before the new index exists, so each message is indexed once.
    """
    DROP TRIGGER messages_indexed;
    DROP TRIGGER messages_unindexed;
    DROP TRIGGER messages_reindexed;
    DROP TABLE message_index;
    ALTER TABLE messages ADD COLUMN before_terms TEXT;
    ALTER TABLE messages ADD COLUMN after_terms TEXT;
    CREATE INDEX messages_thread ON messages (chat_key, partner_id, audience, id)
        WHERE terms IS NOT NULL AND role IN ('user', 'assistant', 'context');
    UPDATE messages SET before_terms = t.before, after_terms = t.after FROM (
        SELECT id, LAG(terms) OVER w AS before, LEAD(terms) OVER w AS after FROM messages
        WHERE terms IS NOT NULL AND role IN ('user', 'assistant', 'context')
        WINDOW w AS (PARTITION BY chat_key, partner_id, audience ORDER BY id)
    ) AS t WHERE messages.id = t.id;
    CREATE VIRTUAL TABLE message_index USING fts5(
        terms, scope, before_terms, after_terms, content = 'messages', content_rowid = 'id',
        tokenize = 'unicode61 remove_diacritics 2'
    );
    INSERT INTO message_index (rowid, terms, scope, before_terms, after_terms)
    SELECT id, terms, scope, before_terms, after_terms FROM messages WHERE terms IS NOT NULL;
    -- a new message becomes the "after" of the one before it in its thread; the insert
    -- itself carries its "before" (see Store._insert_message)
    CREATE TRIGGER messages_indexed AFTER INSERT ON messages WHEN new.terms IS NOT NULL BEGIN
        INSERT INTO message_index (rowid, terms, scope, before_terms, after_terms)
        VALUES (new.id, new.terms, new.scope, new.before_terms, new.after_terms);
        UPDATE messages SET after_terms = new.terms
        WHERE new.role IN ('user', 'assistant', 'context') AND id = (
            SELECT id FROM messages WHERE chat_key = new.chat_key
            AND partner_id = new.partner_id AND audience = new.audience
            AND terms IS NOT NULL AND role IN ('user', 'assistant', 'context')
            AND id < new.id ORDER BY id DESC LIMIT 1
        );
    END;
    CREATE TRIGGER messages_unindexed AFTER DELETE ON messages WHEN old.terms IS NOT NULL BEGIN
        INSERT INTO message_index (message_index, rowid, terms, scope, before_terms, after_terms)
        VALUES ('delete', old.id, old.terms, old.scope, old.before_terms, old.after_terms);
    END;
    CREATE TRIGGER messages_reindexed
    AFTER UPDATE OF terms, scope, before_terms, after_terms ON messages BEGIN
        INSERT INTO message_index (message_index, rowid, terms, scope, before_terms, after_terms)
        SELECT 'delete', old.id, old.terms, old.scope, old.before_terms, old.after_terms
        WHERE old.terms IS NOT NULL;
        INSERT INTO message_index (rowid, terms, scope, before_terms, after_terms)
        SELECT new.id, new.terms, new.scope, new.before_terms, new.after_terms
        WHERE new.terms IS NOT NULL;
    END;
    """,
    # 10: index terms tagged with their audience, so a search reads only the doclists of the
    # audiences it may see; search_scopes lists a partner's audiences for shared-scope search
    Migration(
        """
        DROP TRIGGER messages_indexed;
        DROP TRIGGER messages_unindexed;
        DROP TRIGGER messages_reindexed;
        DROP TABLE message_index;
        CREATE TABLE search_scopes (
            partner_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            PRIMARY KEY (partner_id, scope)
        );
        INSERT OR IGNORE INTO search_scopes (partner_id, scope)
        SELECT DISTINCT partner_id, scope FROM messages WHERE scope IS NOT NULL;
        """,
        then="_rebuild_search_terms",
        after="""
        CREATE VIRTUAL TABLE message_index USING fts5(
            terms, scope, before_terms, after_terms, content = 'messages',
            content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
        );
        INSERT INTO message_index (rowid, terms, scope, before_terms, after_terms)
        SELECT id, terms, scope, before_terms, after_terms FROM messages
        WHERE terms IS NOT NULL;
        -- a new message becomes the "after" of the one before it in its thread; the insert
        -- itself carries its "before" (see Store._insert_message)
        CREATE TRIGGER messages_indexed AFTER INSERT ON messages WHEN new.terms IS NOT NULL
        BEGIN
            INSERT INTO message_index (rowid, terms, scope, before_terms, after_terms)
            VALUES (new.id, new.terms, new.scope, new.before_terms, new.after_terms);
            INSERT OR IGNORE INTO search_scopes (partner_id, scope)
            VALUES (new.partner_id, new.scope);
            UPDATE messages SET after_terms = new.terms
            WHERE new.role IN ('user', 'assistant', 'context') AND id = (
                SELECT id FROM messages WHERE chat_key = new.chat_key
                AND partner_id = new.partner_id AND audience = new.audience
                AND terms IS NOT NULL AND role IN ('user', 'assistant', 'context')
                AND id < new.id ORDER BY id DESC LIMIT 1
            );
        END;
        CREATE TRIGGER messages_unindexed AFTER DELETE ON messages WHEN old.terms IS NOT NULL
        BEGIN
            INSERT INTO message_index (message_index, rowid, terms, scope, before_terms,
                after_terms)
            VALUES ('delete', old.id, old.terms, old.scope, old.before_terms, old.after_terms);
        END;
        CREATE TRIGGER messages_reindexed
        AFTER UPDATE OF terms, scope, before_terms, after_terms ON messages BEGIN
            INSERT INTO message_index (message_index, rowid, terms, scope, before_terms,
                after_terms)
            SELECT 'delete', old.id, old.terms, old.scope, old.before_terms, old.after_terms
            WHERE old.terms IS NOT NULL;
            INSERT INTO message_index (rowid, terms, scope, before_terms, after_terms)
            SELECT new.id, new.terms, new.scope, new.before_terms, new.after_terms
            WHERE new.terms IS NOT NULL;
        END;
        """,
    ),
    # 11: owners who claimed a platform with a one-time code; approvals told to the user
    """
    CREATE TABLE claim_codes (
        code_hash TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL,
        used_by TEXT
    );
    CREATE TABLE claimed_owners (
        user_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL UNIQUE,
        claimed_at REAL NOT NULL
    );
    ALTER TABLE pairing_requests ADD COLUMN announced_at REAL;
    UPDATE pairing_requests SET announced_at = created_at WHERE status = 'approved';
    """,
    # 12: voice and images. A message's media are referenced by platform file id (never their
    # bytes); a reply's actions (reactions, stickers, speaking it) wait here for delivery.
    # Deleting a message (/forget history) takes its media references with it.
    """
    CREATE TABLE media (
        message_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        ref TEXT NOT NULL,
        mime TEXT,
        seconds REAL,
        bytes INTEGER,
        filename TEXT,
        state TEXT NOT NULL DEFAULT 'new',
        PRIMARY KEY (message_id, kind, ref)
    );
    CREATE TRIGGER media_removed AFTER DELETE ON messages BEGIN
        DELETE FROM media WHERE message_id = old.id;
    END;
    ALTER TABLE users ADD COLUMN voice_mode TEXT;
    ALTER TABLE usage ADD COLUMN units REAL NOT NULL DEFAULT 0;
    """,
    # 13: the owner's web page: one-time login links and browser sessions, both kept only as
    # hashes of their secrets (a copy of the database logs nobody in)
    """
    CREATE TABLE web_logins (
        token_hash TEXT PRIMARY KEY,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL
    );
    CREATE TABLE web_sessions (
        session_hash TEXT PRIMARY KEY,
        csrf_token TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    """,
]
THREAD_ROLES = ("user", "assistant", "context")
"""Roles that make up a conversation thread: each one is its neighbours' context. (The
schema's triggers and partial index spell the same list.)"""
CONTEXT_WEIGHT = 0.5
"""BM25 weight of the neighbours' words against a message's own (1.0). Measured with
bench/recall.py: 0.3 to 0.8 are within 0.04 of each other; 0.5 is best or level on R@1 and
R@10 in every language there, and a message's own words still rank it above its neighbours."""
REINDEX_BATCH = 2000
"""Messages re-indexed per round trip when search terms are recomputed."""

MESSAGE_COLUMNS = (
    "id, session_id, partner_id, chat_key, platform_message_id, user_key, speaker, role, text, "
    "audience, status, created_at"
)
SESSION_COLUMNS = (
    "id, partner_id, chat_key, user_key, audience, kind, carry_from, title, system_prompt, "
    "created_at, last_active_at, ended_at, reviewed_upto, review_attempts, review_error, "
    "review_due_at"
)
SEARCHABLE_ROLES = ("user", "assistant", "context", "journal")
"""Roles partner_search can find; tool traffic and notices never are."""


def _statements(script: str) -> list[str]:
    """A script's statements, for running them one by one (a trigger body holds ';' of its
    own, so sqlite3.complete_statement decides where each ends)."""
    statements, pending = [], ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    return [s for s in statements if s]


class StoreError(Exception):
    """The database could not be opened or used."""


@dataclass(frozen=True)
class MessageRow:
    id: int
    session_id: str | None
    partner_id: str | None
    chat_key: str
    platform_message_id: str | None
    user_key: str | None
    speaker: str
    role: str
    text: str
    audience: str
    status: str
    created_at: float


@dataclass(frozen=True)
class SessionRow:
    id: str
    partner_id: str | None
    chat_key: str
    user_key: str | None
    audience: str
    kind: str
    carry_from: str | None
    title: str
    system_prompt: str
    created_at: float
    last_active_at: float
    ended_at: float | None
    reviewed_upto: int
    review_attempts: int
    review_error: str | None
    review_due_at: float | None


@dataclass(frozen=True)
class DeliveryRetry:
    """Where a reply the platform refused for now stands."""

    message_id: int
    attempts: int
    first_failed_at: float
    next_attempt_at: float
    last_error: str


@dataclass(frozen=True)
class ChatRow:
    chat_key: str
    platform: str
    platform_chat_id: str
    thread_id: str | None
    kind: str
    title: str | None
    selected_partner: str | None


@dataclass(frozen=True)
class SearchHit:
    message_id: int
    session_title: str
    role: str
    text: str
    created_at: float
    platform_message_id: str | None


@dataclass(frozen=True)
class ForgetOperation:
    """One ``/forget``: what to remove, recorded before anything is removed (DESIGN.md
    "Forgetting is an operation, not a loop"). ``texts`` are what the steps search for; they
    are cleared once the steps ran, when ``status`` moves from running to scrubbed; done
    means the search index and the WAL were cleaned up too. The counts answer the user."""

    partner_id: str
    user_key: str
    kind: str
    request: str | None = None
    """The command's platform message, so a redelivered command finds its operation."""
    entry_ids: tuple[str, ...] = ()
    hashes: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    session_ids: tuple[str, ...] = ()
    """Sessions whose title is one of the user's messages (``history``)."""
    entries: int = 0
    passages: int = 0
    messages: int = 0
    status: str = "running"
    id: int = 0


@dataclass(frozen=True)
class MediaRow:
    """A voice note or photo of a message (by platform file id), or an action of a reply:
    ``react`` (an emoji), ``sticker`` (a file id), ``speak`` (send it as a voice bubble)."""

    message_id: int
    kind: str
    ref: str
    mime: str | None = None
    seconds: float | None = None
    bytes: int | None = None
    filename: str | None = None
    state: str = "new"


@dataclass(frozen=True)
class NewMedia:
    kind: str
    ref: str
    mime: str | None = None
    seconds: float | None = None
    bytes: int | None = None
    filename: str | None = None


@dataclass(frozen=True)
class NewMessage:
    """A message to record. ``dedup_key`` makes a repeated platform message a no-op."""

    chat_key: str
    role: str
    text: str
    audience: str
    status: str = "done"
    dedup_key: str | None = None
    queue_key: str | None = None
    session_id: str | None = None
    partner_id: str | None = None
    platform_message_id: str | None = None
    user_key: str | None = None
    speaker: str = ""
    created_at: float | None = None
    answers_upto: int | None = None
    """For a reply: the last inbound message it answers (what it quotes)."""
    media: tuple[NewMedia, ...] = ()
    """Stored with the message, in the same statement batch: a file id is never lost."""


def new_session_id() -> str:
    return uuid.uuid4().hex


def audience_token(partner_id: str, audience: str) -> str:
    """The index's scope column: one opaque token per (partner, audience), so a per-user
    search reads only that user's doclist, never the partner's whole history."""
    return "a" + hashlib.sha1(f"{partner_id}\x00{audience}".encode()).hexdigest()[:16]


def term_tag(scope: str) -> str:
    """The prefix of every index term of one scope token's messages: an index term is per
    audience, so a search reads only the postings of the audiences it may see. (Two audiences
    sharing a tag would only share doclists; the scope filter still keeps them apart.)"""
    return scope[1:9]


class Store:
    """The store interface, implemented on SQLite through aiosqlite."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        # One connection is shared by every task: writes take turns so that one task's
        # statement never lands inside (and rolls back with) another task's transaction.
        self._write_lock = asyncio.Lock()
        # what upsert_user/upsert_chat last wrote, so an unchanged name costs no write
        self._written: dict[tuple[str, str], tuple[Any, ...]] = {}
        self._languages: dict[str, str] = {}
        """Each partner's search language (stemmer); absent: the default."""

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        async with self._write_lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            await self._db.execute("COMMIT")

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """One round trip to the database thread for a whole result."""
        return list(await self._db.execute_fetchall(sql, params))

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Cursor:
        async with self._write_lock:
            return await self._db.execute(sql, params)

    async def _write_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            async with self._transaction():
                await self._db.executemany(sql, rows)

    @classmethod
    async def open(cls, path: Path) -> Store:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the database {path}: {exc}") from exc
        db.row_factory = aiosqlite.Row
        store = cls(db, path)
        try:
            await store._prepare()
        except sqlite3.DatabaseError as exc:
            await db.close()
            raise StoreError(f"cannot use the database {path}: {exc}") from exc
        return store

    async def close(self) -> None:
        await self._db.close()

    async def _prepare(self) -> None:
        await self._db.execute("PRAGMA journal_mode = WAL")
        await self._db.execute("PRAGMA synchronous = NORMAL")
        await self._db.execute("PRAGMA busy_timeout = 5000")
        await self._db.execute("PRAGMA foreign_keys = ON")
        # deleted rows are overwritten, not left in free space: forgotten text must not stay
        # readable in the file (some builds have this on by default, not all)
        await self._db.execute("PRAGMA secure_delete = ON")
        row = await self._one("PRAGMA user_version")
        version = int(row[0]) if row else 0
        if version > len(SCHEMA):
            raise StoreError(
                f"{self.path} was written by a newer version (schema {version}); upgrade first"
            )
        for number, step in enumerate(SCHEMA[version:], start=version + 1):
            await self._migrate(number, step)
        rows = await self._all("SELECT partner_id, language FROM search_languages")
        self._languages = {row[0]: row[1] for row in rows}

    async def _migrate(self, number: int, step: str | Migration) -> None:
        """One schema version, its Python part included, in one transaction."""
        sql = step if isinstance(step, str) else step.sql
        # executescript commits an open transaction first, so BEGIN goes inside the script
        await self._db.executescript(f"BEGIN; {sql};")
        try:
            if isinstance(step, Migration):
                await getattr(self, step.then)()
                if step.after:
                    await self._execute_script(step.after)
            await self._db.execute(f"PRAGMA user_version = {number}")
        except BaseException:
            await self._db.execute("ROLLBACK")
            raise
        await self._db.execute("COMMIT")

    async def _execute_script(self, script: str) -> None:
        """Run several statements inside the open transaction (executescript would commit)."""
        for statement in _statements(script):
            await self._db.execute(statement)

    async def schema_version(self) -> int:
        row = await self._one("PRAGMA user_version")
        return int(row[0]) if row else 0

    # ---- users and chats -------------------------------------------------------------

    async def upsert_user(
        self, user_key: str, platform: str, platform_user_id: str, name: str, username: str | None
    ) -> None:
        if self._written.get(("user", user_key)) == (name, username):
            return
        now = time.time()
        await self._write(
            "INSERT INTO users (user_key, platform, platform_user_id, display_name, username,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (user_key) DO UPDATE SET display_name = excluded.display_name,"
            " username = excluded.username, updated_at = excluded.updated_at"
            " WHERE display_name IS NOT excluded.display_name"
            " OR username IS NOT excluded.username",
            (user_key, platform, platform_user_id, name, username, now, now),
        )
        self._written[("user", user_key)] = (name, username)

    async def user(self, user_key: str) -> dict[str, Any] | None:
        row = await self._one("SELECT * FROM users WHERE user_key = ?", (user_key,))
        return dict(row) if row else None

    async def set_user_access(self, user_key: str, access: str) -> bool:
        cursor = await self._write(
            "UPDATE users SET access = ?, updated_at = ? WHERE user_key = ?",
            (access, time.time(), user_key),
        )
        return cursor.rowcount > 0

    async def upsert_chat(
        self,
        chat_key: str,
        platform: str,
        chat_id: str,
        thread_id: str | None,
        kind: str,
        title: str | None,
    ) -> None:
        if self._written.get(("chat", chat_key)) == (kind, title):
            return
        now = time.time()
        await self._write(
            "INSERT INTO chats (chat_key, platform, platform_chat_id, thread_id, kind, title,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (chat_key) DO UPDATE SET title = excluded.title,"
            " updated_at = excluded.updated_at WHERE title IS NOT excluded.title",
            (chat_key, platform, chat_id, thread_id, kind, title, now, now),
        )
        self._written[("chat", chat_key)] = (kind, title)

    async def chat(self, chat_key: str) -> ChatRow | None:
        row = await self._one(
            "SELECT chat_key, platform, platform_chat_id, thread_id, kind, title, selected_partner"
            " FROM chats WHERE chat_key = ?",
            (chat_key,),
        )
        return ChatRow(*row) if row else None

    async def selected_partner(self, chat_key: str) -> str | None:
        row = await self._one("SELECT selected_partner FROM chats WHERE chat_key = ?", (chat_key,))
        return row[0] if row else None

    async def select_partner(self, chat_key: str, partner_id: str | None) -> None:
        await self._write(
            "UPDATE chats SET selected_partner = ?, updated_at = ? WHERE chat_key = ?",
            (partner_id, time.time(), chat_key),
        )

    # ---- bindings --------------------------------------------------------------------

    async def bind(self, platform: str, chat_id: str, partner_id: str, source: str) -> bool:
        cursor = await self._write(
            "INSERT OR IGNORE INTO bindings (platform, chat_id, partner_id, source, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (platform, chat_id, partner_id, source, time.time()),
        )
        return cursor.rowcount > 0

    async def unbind(self, platform: str, chat_id: str, partner_id: str | None) -> int:
        sql = "DELETE FROM bindings WHERE platform = ? AND chat_id = ? AND source != 'config'"
        params: tuple[str, ...] = (platform, chat_id)
        if partner_id is not None:
            sql += " AND partner_id = ?"
            params += (partner_id,)
        cursor = await self._write(sql, params)
        return cursor.rowcount

    async def bindings(self, platform: str | None = None, chat_id: str | None = None) -> list[dict]:
        sql = "SELECT platform, chat_id, partner_id, source FROM bindings WHERE 1 = 1"
        params: list[str] = []
        if platform is not None:
            sql += " AND platform = ?"
            params.append(platform)
        if chat_id is not None:
            sql += " AND chat_id = ?"
            params.append(chat_id)
        return [dict(row) for row in await self._all(sql + " ORDER BY created_at", params)]

    async def replace_config_bindings(self, rows: Iterable[tuple[str, str, str]]) -> None:
        now = time.time()
        async with self._transaction():
            await self._db.execute("DELETE FROM bindings WHERE source = 'config'")
            await self._db.executemany(
                "INSERT OR REPLACE INTO bindings (platform, chat_id, partner_id, source,"
                " created_at) VALUES (?, ?, ?, 'config', ?)",
                [(p, c, partner, now) for p, c, partner in rows],
            )

    # ---- messages and the work queue -------------------------------------------------

    async def update_seen(self, platform: str, update_id: str) -> bool:
        """Whether :meth:`seen_update` recorded this platform update id (read only)."""
        row = await self._one(
            "SELECT 1 FROM seen_updates WHERE platform = ? AND update_id = ?",
            (platform, update_id),
        )
        return row is not None

    async def seen_update(self, platform: str, update_id: str) -> bool:
        """Record a platform update id; True if it was recorded before (a duplicate)."""
        cursor = await self._write(
            "INSERT OR IGNORE INTO seen_updates (platform, update_id, seen_at) VALUES (?, ?, ?)",
            (platform, update_id, time.time()),
        )
        return cursor.rowcount == 0

    async def reject_update(self, platform: str, update_id: str) -> None:
        """Record a platform update the gateway could not read: skipped like a handled one
        if it comes again, and listed by :meth:`rejected_updates`."""
        await self._write(
            "INSERT OR IGNORE INTO seen_updates (platform, update_id, seen_at, status)"
            " VALUES (?, ?, ?, 'rejected')",
            (platform, update_id, time.time()),
        )

    async def rejected_updates(self, platform: str) -> list[str]:
        """Ids of the updates recorded by :meth:`reject_update`, oldest first."""
        rows = await self._all(
            "SELECT update_id FROM seen_updates WHERE platform = ? AND status = 'rejected'"
            " ORDER BY seen_at, rowid",
            (platform,),
        )
        return [str(row[0]) for row in rows]

    async def add_message(self, message: NewMessage) -> int | None:
        """Record a message and index it; None if its dedup key was recorded before.

        One statement (a trigger fills the index), so one trip to the database thread."""
        async with self._write_lock:
            return await self._insert_message(message)

    async def add_message_with_media(self, message: NewMessage) -> int | None:
        """:meth:`add_message` for a message with media: both in one transaction."""
        async with self._transaction():
            return await self._insert_message(message)

    async def add_messages(self, messages: Sequence[NewMessage]) -> list[int | None]:
        ids: list[int | None] = []
        async with self._transaction():
            for message in messages:
                ids.append(await self._insert_message(message))
        return ids

    async def _insert_message(self, m: NewMessage) -> int | None:
        searchable = m.role in SEARCHABLE_ROLES and m.partner_id
        threaded = searchable and m.role in THREAD_ROLES
        scope = audience_token(m.partner_id, m.audience) if m.partner_id and searchable else None
        # the terms of the message before this one in its thread are its "before" context;
        # the insert trigger makes this one that message's "after"
        cursor = await self._db.execute(
            "INSERT OR IGNORE INTO messages (dedup_key, queue_key, session_id, partner_id,"
            " chat_key, platform_message_id, user_key, speaker, role, text, audience, status,"
            " created_at, answers_upto, terms, scope, before_terms)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN ("
            "  SELECT terms FROM messages WHERE chat_key = ? AND partner_id = ? AND audience = ?"
            f" AND terms IS NOT NULL AND role IN {THREAD_ROLES} ORDER BY id DESC LIMIT 1"
            " ) END)",
            (
                m.dedup_key,
                m.queue_key,
                m.session_id,
                m.partner_id,
                m.chat_key,
                m.platform_message_id,
                m.user_key,
                m.speaker,
                m.role,
                m.text,
                m.audience,
                m.status,
                m.created_at if m.created_at is not None else time.time(),
                m.answers_upto,
                self._terms(m.text, m.partner_id, scope) if scope else None,
                scope,
                bool(threaded),
                m.chat_key,
                m.partner_id,
                m.audience,
            ),
        )
        if cursor.rowcount == 0:
            return None
        message_id = cursor.lastrowid
        assert message_id is not None
        if m.media:
            await self._db.executemany(
                "INSERT OR IGNORE INTO media (message_id, kind, ref, mime, seconds, bytes,"
                " filename) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (message_id, x.kind, x.ref, x.mime, x.seconds, x.bytes, x.filename)
                    for x in m.media
                ],
            )
        return message_id

    async def pending_queue_keys(self) -> list[str]:
        return [
            row[0]
            for row in await self._all(
                "SELECT DISTINCT queue_key FROM messages WHERE status = 'pending' ORDER BY id"
            )
        ]

    async def pending(self, queue_key: str) -> list[MessageRow]:
        return await self._messages(
            "WHERE status = 'pending' AND queue_key = ? ORDER BY id", (queue_key,)
        )

    async def pending_count(self) -> int:
        row = await self._one("SELECT COUNT(*) FROM messages WHERE status = 'pending'")
        return int(row[0]) if row else 0

    async def finish_turn(
        self,
        inbound_ids: Sequence[int],
        session_id: str | None,
        reply: NewMessage,
        inbound_status: str = "done",
    ) -> int:
        """Close the inbound messages and record the reply, in one transaction. Without a
        session the inbound messages stay out of every session's history."""
        marks = ", ".join("?" for _ in inbound_ids)
        async with self._transaction():
            await self._db.execute(
                f"UPDATE messages SET status = ?, session_id = ? WHERE id IN ({marks})",
                (inbound_status, session_id, *inbound_ids),
            )
            reply_id = await self._insert_message(replace(reply, answers_upto=max(inbound_ids)))
            assert reply_id is not None
            await self._db.execute(
                "UPDATE sessions SET last_active_at = ? WHERE id = ?", (time.time(), session_id)
            )
        return reply_id

    async def count_failed_turn(self, message_ids: Sequence[int]) -> int:
        """Count a turn that raised against each of its messages that is still pending; the
        highest count, or 0 when none is pending any more (the turn had recorded its reply)."""
        marks = ", ".join("?" for _ in message_ids)
        pending = f"status = 'pending' AND id IN ({marks})"
        async with self._transaction():
            await self._db.execute(
                f"UPDATE messages SET turn_attempts = turn_attempts + 1 WHERE {pending}",
                tuple(message_ids),
            )
            cursor = await self._db.execute(
                f"SELECT MAX(turn_attempts) FROM messages WHERE {pending}", tuple(message_ids)
            )
            row = await cursor.fetchone()
        return int(row[0] or 0) if row else 0

    async def turn_attempts(self, message_id: int) -> int:
        """How many turns raised while this message waited for its answer."""
        row = await self._one("SELECT turn_attempts FROM messages WHERE id = ?", (message_id,))
        return int(row[0]) if row else 0

    async def assign_session(self, message_ids: Sequence[int], session_id: str) -> None:
        async with self._transaction():
            await self._db.executemany(
                "UPDATE messages SET session_id = ? WHERE id = ?",
                [(session_id, message_id) for message_id in message_ids],
            )

    async def interrupted_deliveries(self) -> list[int]:
        """Replies a stop or crash cut off while they were being sent (none waits for a retry
        of its own: those are the retry loop's)."""
        rows = await self._all(
            "SELECT id FROM messages WHERE status = 'delivering' AND id NOT IN"
            " (SELECT message_id FROM delivery_retries) ORDER BY id"
        )
        return [int(row[0]) for row in rows]

    async def delivery_retry(self, message_id: int) -> DeliveryRetry | None:
        row = await self._one(
            "SELECT message_id, attempts, first_failed_at, next_attempt_at, last_error"
            " FROM delivery_retries WHERE message_id = ?",
            (message_id,),
        )
        return DeliveryRetry(*row) if row else None

    async def schedule_delivery_retry(self, retry: DeliveryRetry) -> None:
        await self._write(
            "INSERT OR REPLACE INTO delivery_retries (message_id, attempts, first_failed_at,"
            " next_attempt_at, last_error) VALUES (?, ?, ?, ?, ?)",
            (
                retry.message_id,
                retry.attempts,
                retry.first_failed_at,
                retry.next_attempt_at,
                retry.last_error,
            ),
        )

    async def chats_with_due_retries(self, now: float) -> list[str]:
        """Chats with a reply whose next attempt is due, the one waiting longest first."""
        rows = await self._all(
            "SELECT m.chat_key FROM delivery_retries r JOIN messages m ON m.id = r.message_id"
            " WHERE r.next_attempt_at <= ? AND m.status = 'delivering'"
            " GROUP BY m.chat_key ORDER BY MIN(m.id)",
            (now,),
        )
        return [str(row[0]) for row in rows]

    async def next_delivery_retry_at(self) -> float | None:
        row = await self._one("SELECT MIN(next_attempt_at) FROM delivery_retries")
        return float(row[0]) if row and row[0] is not None else None

    async def waiting_replies(self, chat_key: str, before_id: int | None = None) -> list[int]:
        """Replies of a chat that wait for a retry (older than ``before_id``), oldest first."""
        rows = await self._all(
            "SELECT m.id FROM messages m JOIN delivery_retries r ON r.message_id = m.id"
            " WHERE m.chat_key = ? AND m.id < ? AND m.status = 'delivering' ORDER BY m.id",
            (chat_key, before_id if before_id is not None else 2**63 - 1),
        )
        return [int(row[0]) for row in rows]

    async def delivered_chunks(self, message_id: int) -> int:
        row = await self._one("SELECT COUNT(*) FROM deliveries WHERE message_id = ?", (message_id,))
        return int(row[0]) if row else 0

    async def record_chunk(self, message_id: int, chunk: int, platform_message_id: str | None):
        await self._write(
            "INSERT OR IGNORE INTO deliveries (message_id, chunk, platform_message_id, sent_at)"
            " VALUES (?, ?, ?, ?)",
            (message_id, chunk, platform_message_id, time.time()),
        )

    async def answered_message(self, reply_id: int) -> MessageRow | None:
        """The last inbound message a reply answers (what the reply should quote)."""
        rows = await self._messages(
            "WHERE id = (SELECT answers_upto FROM messages WHERE id = ?)", (reply_id,)
        )
        return rows[0] if rows else None

    # ---- media ---------------------------------------------------------------------------

    async def media_for(self, message_ids: Sequence[int]) -> dict[int, list[MediaRow]]:
        """The media (or reply actions) of these messages, in the order they were stored."""
        if not message_ids:
            return {}
        marks = ", ".join("?" for _ in message_ids)
        rows = await self._all(
            "SELECT message_id, kind, ref, mime, seconds, bytes, filename, state FROM media"
            f" WHERE message_id IN ({marks}) ORDER BY rowid",
            tuple(message_ids),
        )
        found: dict[int, list[MediaRow]] = {}
        for row in rows:
            found.setdefault(int(row[0]), []).append(MediaRow(*row))
        return found

    async def add_media(self, message_id: int, media: Sequence[NewMedia]) -> None:
        await self._write_many(
            "INSERT OR IGNORE INTO media (message_id, kind, ref, mime, seconds, bytes, filename)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(message_id, x.kind, x.ref, x.mime, x.seconds, x.bytes, x.filename) for x in media],
        )

    async def set_media_state(self, message_id: int, kind: str, ref: str, state: str) -> None:
        await self._write(
            "UPDATE media SET state = ? WHERE message_id = ? AND kind = ? AND ref = ?",
            (state, message_id, kind, ref),
        )

    async def set_message_text(
        self, message_id: int, text: str, media: tuple[str, str, str] | None = None
    ) -> None:
        """Replace a message's text (a transcript, a photo's description), index included;
        ``media`` (kind, ref, state) is the state of the medium it came from, set with it.
        The update trigger re-indexes the row; its neighbours' context columns are rewritten."""
        async with self._transaction():
            if media is not None:
                await self._db.execute(
                    "UPDATE media SET state = ? WHERE message_id = ? AND kind = ? AND ref = ?",
                    (media[2], message_id, media[0], media[1]),
                )
            cursor = await self._db.execute(
                "SELECT partner_id, role, audience FROM messages WHERE id = ?", (message_id,)
            )
            row = await cursor.fetchone()
            if row is None:
                return
            partner_id, role, audience = row
            searchable = role in SEARCHABLE_ROLES and partner_id
            scope = audience_token(partner_id, audience) if searchable else None
            terms = self._terms(text, partner_id, scope) if scope else None
            await self._db.execute(
                "UPDATE messages SET text = ?, terms = ?, scope = ? WHERE id = ?",
                (text, terms, scope, message_id),
            )
            await self._rewrite_neighbours(await self._threads("id = ?", (message_id,)))

    async def reply_for_platform_message(
        self, chat_key: str, platform_message_id: str
    ) -> MessageRow | None:
        """The reply one of whose chunks is this platform message, if any."""
        rows = await self._messages(
            "WHERE chat_key = ? AND role = 'assistant' AND id IN (SELECT message_id FROM"
            " deliveries WHERE platform_message_id = ?) ORDER BY id DESC LIMIT 1",
            (chat_key, platform_message_id),
        )
        return rows[0] if rows else None

    async def voice_mode(self, user_key: str) -> str | None:
        row = await self._one("SELECT voice_mode FROM users WHERE user_key = ?", (user_key,))
        return row[0] if row else None

    async def set_voice_mode(self, user_key: str, mode: str) -> None:
        await self._write(
            "UPDATE users SET voice_mode = ?, updated_at = ? WHERE user_key = ?",
            (mode, time.time(), user_key),
        )

    async def mark_delivered(self, message_id: int) -> None:
        await self._write("UPDATE messages SET status = 'delivered' WHERE id = ?", (message_id,))

    async def set_status(self, message_id: int, status: str) -> None:
        await self._write("UPDATE messages SET status = ? WHERE id = ?", (status, message_id))

    async def mark_failed(self, message_id: int) -> None:
        await self._write(
            "UPDATE messages SET status = 'undeliverable' WHERE id = ?", (message_id,)
        )

    async def message(self, message_id: int) -> MessageRow | None:
        rows = await self._messages("WHERE id = ?", (message_id,))
        return rows[0] if rows else None

    async def session_messages(
        self, session_id: str, roles: Sequence[str] = ("user", "assistant"), after_id: int = 0
    ) -> list[MessageRow]:
        marks = ", ".join("?" for _ in roles)
        return await self._messages(
            f"WHERE session_id = ? AND role IN ({marks}) AND id > ? AND status != 'pending'"
            " ORDER BY id",
            (session_id, *roles, after_id),
        )

    async def recent_context(self, chat_key: str, after_id: int, limit: int) -> list[MessageRow]:
        """Unaddressed group chatter since ``after_id``, oldest first, at most ``limit``."""
        rows = await self._messages(
            "WHERE chat_key = ? AND role = 'context' AND id > ? ORDER BY id DESC LIMIT ?",
            (chat_key, after_id, limit),
        )
        return rows[::-1]

    async def recent_reactions(
        self, chat_key: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[MessageRow]:
        """Users' reactions to a partner's messages since ``after_id``, oldest first."""
        rows = await self._messages(
            "WHERE chat_key = ? AND partner_id IS ? AND role = 'reaction' AND id > ?"
            " ORDER BY id DESC LIMIT ?",
            (chat_key, partner_id, after_id, limit),
        )
        return rows[::-1]

    async def last_inbound_at(self, chat_key: str) -> float | None:
        """When the newest stored inbound message of a chat was written (platform time)."""
        row = await self._one(
            "SELECT created_at FROM messages WHERE chat_key = ? AND role IN ('user', 'context')"
            " ORDER BY id DESC LIMIT 1",
            (chat_key,),
        )
        return float(row[0]) if row is not None else None

    async def _messages(self, where: str, params: Sequence[Any]) -> list[MessageRow]:
        return [
            MessageRow(*row)
            for row in await self._all(f"SELECT {MESSAGE_COLUMNS} FROM messages {where}", params)
        ]

    # ---- sessions --------------------------------------------------------------------

    async def open_session(self, chat_key: str, partner_id: str | None) -> SessionRow | None:
        rows = await self._sessions(
            "WHERE chat_key = ? AND partner_id IS ? AND ended_at IS NULL AND kind = 'chat'"
            " ORDER BY created_at DESC LIMIT 1",
            (chat_key, partner_id),
        )
        return rows[0] if rows else None

    async def latest_session(
        self, chat_key: str, partner_id: str | None, kind: str = "chat"
    ) -> SessionRow | None:
        rows = await self._sessions(
            "WHERE chat_key = ? AND partner_id IS ? AND kind = ? ORDER BY created_at DESC LIMIT 1",
            (chat_key, partner_id, kind),
        )
        return rows[0] if rows else None

    async def create_session(
        self,
        *,
        partner_id: str | None,
        chat_key: str,
        user_key: str | None,
        audience: str,
        system_prompt: str,
        title: str = "",
        kind: str = "chat",
        carry_from: str | None = None,
        session_id: str | None = None,
    ) -> SessionRow:
        now = time.time()
        session_id = session_id or new_session_id()
        await self._write(
            "INSERT INTO sessions (id, partner_id, chat_key, user_key, audience, kind,"
            " carry_from, title, system_prompt, created_at, last_active_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                session_id,
                partner_id,
                chat_key,
                user_key,
                audience,
                kind,
                carry_from,
                title,
                system_prompt,
                now,
                now,
            ),
        )
        session = await self.session(session_id)
        assert session is not None
        return session

    async def session(self, session_id: str) -> SessionRow | None:
        rows = await self._sessions("WHERE id = ?", (session_id,))
        return rows[0] if rows else None

    async def set_session_title(self, session_id: str, title: str) -> None:
        await self._write(
            "UPDATE sessions SET title = ? WHERE id = ? AND title = ''", (title, session_id)
        )

    async def end_session(self, session_id: str, reason: str) -> None:
        await self._write(
            "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
            (time.time(), reason, session_id),
        )

    async def end_chat_sessions(self, chat_key: str, reason: str) -> list[str]:
        """End this chat's open sessions, its consult thread included."""
        rows = await self._sessions(
            "WHERE chat_key IN (?, ?) AND ended_at IS NULL AND kind = 'chat'",
            (chat_key, f"{chat_key}#consult"),
        )
        for row in rows:
            await self.end_session(row.id, reason)
        return [row.id for row in rows]

    async def sessions_of(self, partner_id: str, limit: int = 50) -> list[SessionRow]:
        return await self._sessions(
            "WHERE partner_id = ? ORDER BY last_active_at DESC LIMIT ?", (partner_id, limit)
        )

    async def _sessions(self, where: str, params: Sequence[Any]) -> list[SessionRow]:
        return [
            SessionRow(*row)
            for row in await self._all(f"SELECT {SESSION_COLUMNS} FROM sessions {where}", params)
        ]

    # ---- review state ------------------------------------------------------------------

    async def mark_review_due(self, session_id: str, at: float) -> None:
        """Ask for a review at ``at``; an earlier request stands (that is the debounce)."""
        await self._write(
            "UPDATE sessions SET review_due_at = ? WHERE id = ?"
            " AND (review_due_at IS NULL OR review_due_at > ?)",
            (at, session_id, at),
        )

    async def due_reviews(self, now: float) -> list[SessionRow]:
        return await self._sessions(
            "WHERE review_due_at IS NOT NULL AND review_due_at <= ? ORDER BY review_due_at",
            (now,),
        )

    async def sessions_to_review(
        self, *, idle_before: float | None = None, partner_id: str | None = None
    ) -> list[SessionRow]:
        """Sessions holding conversation newer than their review watermark."""
        where = (
            "WHERE kind = 'chat' AND EXISTS (SELECT 1 FROM messages m WHERE m.session_id ="
            " sessions.id AND m.role IN ('user', 'assistant') AND m.id > sessions.reviewed_upto)"
        )
        params: list[Any] = []
        if idle_before is not None:
            where += " AND last_active_at < ? AND review_due_at IS NULL"
            params.append(idle_before)
        if partner_id is not None:
            where += " AND partner_id = ?"
            params.append(partner_id)
        return await self._sessions(where + " ORDER BY last_active_at", params)

    async def review_succeeded(self, session_id: str, upto: int) -> None:
        await self._write(
            "UPDATE sessions SET reviewed_upto = MAX(reviewed_upto, ?), review_attempts = 0,"
            " review_error = NULL, review_due_at = NULL, reviewed_at = ? WHERE id = ?",
            (upto, time.time(), session_id),
        )

    async def review_failed(self, session_id: str, error: str, retry_at: float) -> int:
        """Count a failed attempt (the watermark stays); returns the attempts so far."""
        await self._write(
            "UPDATE sessions SET review_attempts = review_attempts + 1, review_error = ?,"
            " review_due_at = ? WHERE id = ?",
            (error[:500], retry_at, session_id),
        )
        session = await self.session(session_id)
        return session.review_attempts if session else 0

    # ---- search ----------------------------------------------------------------------

    async def search(
        self,
        partner_id: str,
        query: str,
        audiences: Sequence[str] | None,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[SearchHit]:
        """Best matches first (BM25, newer first on ties) among the given audiences.

        ``audiences=None`` searches all of the partner's history (shared memory scope).
        ``since``/``until`` (epoch seconds, until exclusive) and ``speaker`` (a name, any
        case) narrow the messages searched.
        """
        if audiences is None:
            rows = await self._all(
                "SELECT scope FROM search_scopes WHERE partner_id = ?", (partner_id,)
            )
            scopes = [row[0] for row in rows]
        else:
            scopes = [audience_token(partner_id, a) for a in audiences]
        tags = [term_tag(scope) for scope in scopes]
        expression = match_expression(query, self._language(partner_id), tags)
        if expression is None or not scopes:
            return []
        tokens = " OR ".join(f'"{scope}"' for scope in scopes)
        terms = f"scope : ({tokens}) AND {{terms before_terms after_terms}} : ({expression})"
        sql = (
            "SELECT m.id, COALESCE(s.title, ''), m.role, m.text, m.created_at,"
            " m.platform_message_id FROM message_index"
            " JOIN messages m ON m.id = message_index.rowid"
            " LEFT JOIN sessions s ON s.id = m.session_id"
            " WHERE message_index MATCH ? AND m.partner_id = ? AND m.status != 'pending'"
            " AND m.created_at >= COALESCE(?, m.created_at)"
            " AND m.created_at < COALESCE(?, m.created_at + 1)"
            " AND m.speaker = COALESCE(?, m.speaker) COLLATE NOCASE"
            " ORDER BY bm25(message_index, 1.0, 0.0, ?, ?), m.created_at DESC LIMIT ?"
        )
        params = (
            terms, partner_id, since, until, speaker, CONTEXT_WEIGHT, CONTEXT_WEIGHT, limit
        )  # fmt: skip
        return [SearchHit(*row) for row in await self._all(sql, params)]

    def _language(self, partner_id: str | None) -> str:
        return self._languages.get(partner_id or "", DEFAULT_LANGUAGE)

    def _terms(self, text: str, partner_id: str | None, scope: str) -> str:
        """A message's index terms: stemmed in its partner's language, tagged with its scope."""
        return index_terms(text, self._language(partner_id), term_tag(scope))

    async def set_search_language(self, partner_id: str, language: str) -> int:
        """Stem this partner's history in ``language`` from now on (a Snowball name, see
        ``search_language``); a change re-indexes what is stored. Returns messages re-indexed."""
        if self._language(partner_id) == language:
            return 0
        async with self._transaction():
            await self._db.execute(
                "INSERT INTO search_languages (partner_id, language) VALUES (?, ?)"
                " ON CONFLICT (partner_id) DO UPDATE SET language = excluded.language",
                (partner_id, language),
            )
            self._languages[partner_id] = language
            try:
                count = await self._recompute_search_terms(partner_id)
                await self._rewrite_neighbours(await self._threads("partner_id = ?", (partner_id,)))
                return count
            except BaseException:
                self._languages = {
                    row[0]: row[1]
                    for row in await self._all("SELECT partner_id, language FROM search_languages")
                }
                raise

    async def _recompute_search_terms(self, partner_id: str | None = None) -> int:
        """Recompute the index terms of stored messages (all, or one partner's) in Python and
        rewrite the rows whose terms changed; the update trigger rewrites the index. Runs
        inside the caller's transaction."""
        where = "terms IS NOT NULL AND id > ?"
        params: list[Any] = []
        if partner_id is not None:
            where += " AND partner_id = ?"
            params.append(partner_id)
        changed, after = 0, 0
        while True:
            rows = await self._all(
                f"SELECT id, partner_id, scope, text, terms FROM messages WHERE {where}"
                " ORDER BY id LIMIT ?",
                (after, *params, REINDEX_BATCH),
            )
            if not rows:
                return changed
            updates = [
                (terms, row[0])
                for row in rows
                if (terms := self._terms(row[3], row[1], row[2])) != row[4]
            ]
            await self._db.executemany("UPDATE messages SET terms = ? WHERE id = ?", updates)
            changed += len(updates)
            after = rows[-1][0]

    async def _rebuild_search_terms(self) -> None:
        """Every message's terms and context columns recomputed (a migration step, run while
        the index and its triggers are dropped)."""
        await self._recompute_search_terms()
        await self._rewrite_neighbours()

    async def _threads(self, where: str, params: Sequence[Any]) -> list[tuple[str, str, str]]:
        """The conversation threads (chat, partner, audience) that rows matching ``where``
        belong to: what a deletion of those rows must rewrite with _rewrite_neighbours."""
        rows = await self._all(
            f"SELECT DISTINCT chat_key, partner_id, audience FROM messages WHERE ({where})"
            f" AND terms IS NOT NULL AND role IN {THREAD_ROLES}",
            params,
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def _rewrite_neighbours(
        self, threads: Sequence[tuple[str, str, str]] | None = None
    ) -> int:
        """Set every message's context columns to the terms of its neighbours as the threads
        stand now (all threads if None), rewriting only rows that differ; the update trigger
        rewrites their index rows. Every deletion of messages calls this for the threads it
        touched, so no neighbour keeps a copy of forgotten words. Runs inside the caller's
        transaction; returns the rows rewritten."""
        thread = (
            "AND chat_key = ? AND partner_id = ? AND audience = ?" if threads is not None else ""
        )
        sql = (
            "UPDATE messages SET before_terms = t.before, after_terms = t.after FROM ("
            " SELECT id, LAG(terms) OVER w AS before, LEAD(terms) OVER w AS after FROM messages"
            f" WHERE terms IS NOT NULL AND role IN {THREAD_ROLES} {thread}"
            " WINDOW w AS (PARTITION BY chat_key, partner_id, audience ORDER BY id)"
            ") AS t WHERE messages.id = t.id"
            " AND (messages.before_terms IS NOT t.before OR messages.after_terms IS NOT t.after)"
        )
        if threads is None:
            return (await self._db.execute(sql)).rowcount
        rewritten = 0
        for key in threads:
            rewritten += (await self._db.execute(sql, key)).rowcount
        return rewritten

    # ---- what a user owns: forgetting and export -------------------------------------

    async def add_tombstones(self, partner_id: str, user_key: str, hashes: Iterable[str]) -> None:
        now = time.time()
        async with self._transaction():
            await self._db.executemany(
                "INSERT OR IGNORE INTO tombstones (partner_id, user_key, text_hash, created_at)"
                " VALUES (?, ?, ?, ?)",
                [(partner_id, user_key, h, now) for h in hashes],
            )

    async def tombstones(self, partner_id: str, user_key: str) -> set[str]:
        rows = await self._all(
            "SELECT text_hash FROM tombstones WHERE partner_id = ? AND user_key = ?",
            (partner_id, user_key),
        )
        return {row[0] for row in rows}

    async def user_messages(self, partner_id: str, user_key: str) -> list[MessageRow]:
        """A user's messages with a partner and the partner's replies in their DMs."""
        return await self._messages(
            "WHERE partner_id = ? AND (user_key = ? OR audience = ?) ORDER BY id",
            (partner_id, user_key, f"user:{user_key}"),
        )

    async def user_message_ids(
        self, partner_id: str, user_key: str, roles: Sequence[str]
    ) -> list[int]:
        """A user's finished messages (of these roles) with a partner, their DM replies too."""
        marks = ", ".join("?" for _ in roles)
        rows = await self._all(
            "SELECT id FROM messages WHERE partner_id = ? AND (user_key = ? OR audience = ?)"
            f" AND role IN ({marks}) AND status != 'pending' ORDER BY id",
            (partner_id, user_key, f"user:{user_key}", *roles),
        )
        return [row[0] for row in rows]

    async def journal_messages(self, partner_id: str) -> list[MessageRow]:
        """Every journal entry of a partner as search indexes it."""
        return await self._messages(
            "WHERE partner_id = ? AND role = 'journal' ORDER BY id", (partner_id,)
        )

    async def delete_messages(self, message_ids: Sequence[int]) -> int:
        """The one way a message leaves the store: the row, (by the delete trigger) its search
        index entry, and the copies of its words in its neighbours' context columns. Returns
        how many were still there."""
        deleted = 0
        async with self._transaction():
            threads: set[tuple[str, str, str]] = set()
            for message_id in message_ids:
                threads.update(await self._threads("id = ?", (message_id,)))
                cursor = await self._db.execute("DELETE FROM messages WHERE id = ?", (message_id,))
                deleted += cursor.rowcount
            await self._rewrite_neighbours(sorted(threads))
        return deleted

    async def forget_session_prompts(self, partner_id: str, user_key: str) -> None:
        """Frozen prompts hold the user's memory as it was: end those sessions and drop it."""
        await self._write(
            "UPDATE sessions SET system_prompt = '', ended_at = COALESCE(ended_at, ?),"
            " end_reason = COALESCE(end_reason, 'forgotten') WHERE partner_id = ? AND user_key = ?",
            (time.time(), partner_id, user_key),
        )

    async def sessions_titled_by(self, partner_id: str, user_key: str) -> list[str]:
        """A user's DM sessions with a partner, and group sessions opened by their message:
        a session's title is its first message."""
        rows = await self._all(
            "SELECT id FROM sessions WHERE partner_id = ? AND user_key = ? UNION"
            " SELECT m.session_id FROM messages m WHERE m.partner_id = ? AND m.user_key = ?"
            " AND m.role = 'user' AND m.session_id IS NOT NULL AND m.id = (SELECT MIN(f.id)"
            " FROM messages f WHERE f.session_id = m.session_id AND f.role = 'user')",
            (partner_id, user_key, partner_id, user_key),
        )
        return [row[0] for row in rows]

    async def clear_session_titles(self, session_ids: Sequence[str]) -> None:
        async with self._transaction():
            await self._db.executemany(
                "UPDATE sessions SET title = '' WHERE id = ?", [(s,) for s in session_ids]
            )

    async def user_reminders(self, partner_id: str, user_key: str) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT * FROM reminders WHERE partner_id = ? AND user_key = ? ORDER BY id",
            (partner_id, user_key),
        )
        return [dict(row) for row in rows]

    async def delete_reminders(self, reminder_ids: Sequence[int]) -> None:
        async with self._transaction():
            await self._db.executemany(
                "DELETE FROM reminders WHERE id = ?", [(r,) for r in reminder_ids]
            )

    async def begin_forget(self, operation: ForgetOperation) -> ForgetOperation:
        """Record a forget operation and its tombstones, in one transaction, before anything
        is removed (a ``request`` is recorded once: look it up first)."""
        now = time.time()
        async with self._transaction():
            cursor = await self._db.execute(
                "INSERT INTO forget_operations (request, partner_id, user_key, kind, entry_ids,"
                " hashes, texts, session_ids, entries, passages, messages, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    operation.request,
                    operation.partner_id,
                    operation.user_key,
                    operation.kind,
                    json.dumps(operation.entry_ids),
                    json.dumps(operation.hashes),
                    json.dumps(operation.texts, ensure_ascii=False),
                    json.dumps(operation.session_ids),
                    operation.entries,
                    operation.passages,
                    operation.messages,
                    now,
                ),
            )
            await self._db.executemany(
                "INSERT OR IGNORE INTO tombstones (partner_id, user_key, text_hash, created_at)"
                " VALUES (?, ?, ?, ?)",
                [(operation.partner_id, operation.user_key, h, now) for h in operation.hashes],
            )
        assert cursor.lastrowid is not None
        return replace(operation, id=cursor.lastrowid)

    async def forget_operation(self, request: str) -> ForgetOperation | None:
        rows = await self._forget_operations("WHERE request = ?", (request,))
        return rows[0] if rows else None

    async def unfinished_forgets(
        self, partner_id: str | None = None, user_key: str | None = None
    ) -> list[ForgetOperation]:
        """Operations a crash or a failed step left behind, oldest first."""
        where, params = "WHERE status != 'done'", []
        if partner_id is not None and user_key is not None:
            where += " AND partner_id = ? AND user_key = ?"
            params += [partner_id, user_key]
        return await self._forget_operations(where + " ORDER BY id", params)

    async def forget_scrubbed(self, operation_id: int) -> None:
        """Every copy is gone: the operation keeps no text of its own any more."""
        await self._write(
            "UPDATE forget_operations SET status = 'scrubbed', texts = NULL WHERE id = ?",
            (operation_id,),
        )

    async def forget_done(self, operation_id: int) -> None:
        await self._write(
            "UPDATE forget_operations SET status = 'done', texts = NULL, finished_at = ?"
            " WHERE id = ?",
            (time.time(), operation_id),
        )

    async def _forget_operations(self, where: str, params: Sequence[Any]) -> list[ForgetOperation]:
        rows = await self._all(
            "SELECT id, request, partner_id, user_key, kind, entry_ids, hashes, texts,"
            f" session_ids, entries, passages, messages, status FROM forget_operations {where}",
            params,
        )
        return [
            ForgetOperation(
                id=row["id"],
                request=row["request"],
                partner_id=row["partner_id"],
                user_key=row["user_key"],
                kind=row["kind"],
                entry_ids=tuple(json.loads(row["entry_ids"])),
                hashes=tuple(json.loads(row["hashes"])),
                texts=tuple(json.loads(row["texts"] or "[]")),
                session_ids=tuple(json.loads(row["session_ids"])),
                entries=row["entries"],
                passages=row["passages"],
                messages=row["messages"],
                status=row["status"],
            )
            for row in rows
        ]

    async def erase_deleted_text(self) -> bool:
        """After forgetting: rebuild the search index's segments without the deleted rows'
        terms (an FTS5 delete only adds a marker; the terms stay in the old segments until a
        merge) and checkpoint the WAL into the database, truncating it, so no older page
        image keeps the text either. False if a reader kept the checkpoint from finishing."""
        async with self._write_lock:
            await self._db.execute("INSERT INTO message_index (message_index) VALUES ('optimize')")
            cursor = await self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            row = await cursor.fetchone()
        return row is not None and row[0] == 0

    # ---- check-ins and reminders -------------------------------------------------------

    async def set_checkins(
        self, partner_id: str, user_key: str, enabled: bool, reason: str | None = None
    ) -> None:
        await self._write(
            "INSERT INTO checkins (partner_id, user_key, enabled, disabled_reason)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (partner_id, user_key) DO UPDATE SET"
            " enabled = excluded.enabled, disabled_reason = excluded.disabled_reason",
            (partner_id, user_key, int(enabled), reason),
        )

    async def checkin_candidates(
        self, partner_id: str, day_start: float, week_start: float
    ) -> list[dict[str, Any]]:
        """Every opted-in user of a partner with what the check-in gates need, in one query."""
        rows = await self._all(
            "SELECT c.user_key, u.timezone,"
            " (SELECT MAX(m.created_at) FROM messages m WHERE m.user_key = c.user_key"
            "   AND m.partner_id = c.partner_id AND m.role = 'user') AS last_message,"
            " (SELECT MAX(l.sent_at) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0) AS last_checkin,"
            " (SELECT COUNT(*) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0 AND l.sent_at >= ?) AS today,"
            " (SELECT COUNT(*) FROM checkin_log l WHERE l.partner_id = c.partner_id"
            "   AND l.user_key = c.user_key AND l.silent = 0 AND l.sent_at >= ?) AS this_week"
            " FROM checkins c LEFT JOIN users u ON u.user_key = c.user_key"
            " WHERE c.partner_id = ? AND c.enabled = 1",
            (day_start, week_start, partner_id),
        )
        return [dict(row) for row in rows]

    async def set_user_timezone(self, user_key: str, timezone: str) -> None:
        await self._write(
            "UPDATE users SET timezone = ?, updated_at = ? WHERE user_key = ?",
            (timezone, time.time(), user_key),
        )

    async def checkin_partners(self, user_key: str) -> list[str]:
        rows = await self._all(
            "SELECT partner_id FROM checkins WHERE user_key = ? AND enabled = 1", (user_key,)
        )
        return [row[0] for row in rows]

    async def checkin_setting(self, partner_id: str, user_key: str) -> dict[str, Any] | None:
        row = await self._one(
            "SELECT * FROM checkins WHERE partner_id = ? AND user_key = ?", (partner_id, user_key)
        )
        return dict(row) if row else None

    async def record_checkin(
        self, partner_id: str, user_key: str, kind: str, silent: bool, at: float
    ) -> None:
        await self._write(
            "INSERT INTO checkin_log (partner_id, user_key, kind, sent_at, silent)"
            " VALUES (?, ?, ?, ?, ?)",
            (partner_id, user_key, kind, at, int(silent)),
        )

    async def checkins_since(self, partner_id: str, user_key: str, since: float) -> int:
        """Check-ins actually sent (not silent) since a time."""
        row = await self._one(
            "SELECT COUNT(*) FROM checkin_log WHERE partner_id = ? AND user_key = ?"
            " AND sent_at >= ? AND silent = 0",
            (partner_id, user_key, since),
        )
        return int(row[0]) if row else 0

    async def last_user_message_at(self, partner_id: str, user_key: str) -> float | None:
        row = await self._one(
            "SELECT MAX(created_at) FROM messages WHERE partner_id = ? AND user_key = ?"
            " AND role = 'user'",
            (partner_id, user_key),
        )
        return float(row[0]) if row and row[0] is not None else None

    async def add_reminder(self, partner_id: str, user_key: str, due_date: str, about: str) -> bool:
        cursor = await self._write(
            "INSERT OR IGNORE INTO reminders (partner_id, user_key, due_date, about, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (partner_id, user_key, due_date, about, time.time()),
        )
        return cursor.rowcount > 0

    async def pending_reminders(self) -> list[dict[str, Any]]:
        rows = await self._all("SELECT * FROM reminders WHERE status = 'pending' ORDER BY due_date")
        return [dict(row) for row in rows]

    async def close_reminder(self, reminder_id: int, status: str) -> bool:
        """Mark a reminder done; False if another run already did (it fires once)."""
        cursor = await self._write(
            "UPDATE reminders SET status = ? WHERE id = ? AND status = 'pending'",
            (status, reminder_id),
        )
        return cursor.rowcount > 0

    # ---- usage, audit, settings ------------------------------------------------------

    async def add_usage(
        self, day: str, partner_id: str, kind: str, model: str, prompt: int, completion: int
    ) -> None:
        await self._write(
            "INSERT INTO usage (day, partner_id, kind, model, calls, prompt_tokens,"
            " completion_tokens) VALUES (?, ?, ?, ?, 1, ?, ?)"
            " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = calls + 1,"
            " prompt_tokens = prompt_tokens + excluded.prompt_tokens,"
            " completion_tokens = completion_tokens + excluded.completion_tokens",
            (day, partner_id, kind, model, prompt, completion),
        )

    async def add_units(
        self, day: str, partner_id: str, kind: str, model: str, units: float
    ) -> None:
        """Usage that is not tokens: transcribed seconds, spoken characters, images."""
        await self._write(
            "INSERT INTO usage (day, partner_id, kind, model, calls, units)"
            " VALUES (?, ?, ?, ?, 1, ?)"
            " ON CONFLICT (day, partner_id, kind, model) DO UPDATE SET calls = calls + 1,"
            " units = units + excluded.units",
            (day, partner_id, kind, model, units),
        )

    async def units_on(self, day: str) -> dict[str, dict[str, float]]:
        """Units (seconds, characters, images) used on one day, per partner and kind."""
        rows = await self._all(
            "SELECT partner_id, kind, SUM(units) FROM usage WHERE day = ? AND units > 0"
            " GROUP BY partner_id, kind",
            (day,),
        )
        found: dict[str, dict[str, float]] = {}
        for row in rows:
            found.setdefault(row[0], {})[row[1]] = float(row[2] or 0)
        return found

    async def usage(self, since_day: str) -> list[dict[str, Any]]:
        return [
            dict(row)
            for row in await self._all(
                "SELECT * FROM usage WHERE day >= ? ORDER BY day, partner_id, kind", (since_day,)
            )
        ]

    async def audit(self, actor: str, action: str, **detail: Any) -> None:
        await self._write(
            "INSERT INTO audit (time, actor, action, detail) VALUES (?, ?, ?, ?)",
            (time.time(), actor, action, json.dumps(detail, ensure_ascii=False, default=str)),
        )

    async def audit_rows(self, action: str | None = None, limit: int = 100) -> list[dict]:
        sql = "SELECT time, actor, action, detail FROM audit"
        params: tuple[Any, ...] = ()
        if action is not None:
            sql += " WHERE action = ?"
            params = (action,)
        rows = [
            dict(row)
            for row in await self._all(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        ]
        for row in rows:
            row["detail"] = json.loads(row["detail"])
        return rows

    async def create_pairing(self, code: str, user_key: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO pairing_requests (code, user_key, created_at, expires_at)"
            " VALUES (?, ?, ?, ?)",
            (code, user_key, now, now + ttl_seconds),
        )

    async def live_pairings(self, user_key: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > ?"
        params: tuple[Any, ...] = (time.time(),)
        if user_key is not None:
            sql += " AND user_key = ?"
            params += (user_key,)
        return [dict(row) for row in await self._all(sql + " ORDER BY created_at", params)]

    async def pairing(self, code: str) -> dict[str, Any] | None:
        row = await self._one("SELECT * FROM pairing_requests WHERE code = ?", (code,))
        return dict(row) if row else None

    async def close_pairing(self, code: str, status: str) -> None:
        await self._write("UPDATE pairing_requests SET status = ? WHERE code = ?", (status, code))

    async def settings(self) -> dict[str, str]:
        return {row[0]: row[1] for row in await self._all("SELECT key, value FROM settings")}

    async def put_setting(self, key: str, value: str) -> None:
        await self._write(
            "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at",
            (key, value, time.time()),
        )

    async def delete_setting(self, key: str) -> bool:
        cursor = await self._write("DELETE FROM settings WHERE key = ?", (key,))
        return cursor.rowcount > 0

    # ---- owner administration ----------------------------------------------------------

    async def add_transcript_ref(self, session_id: str, referenced_id: str, keep: int) -> None:
        """Reference a session's transcript from an owner session; only the newest ``keep``
        references of that session stay."""
        async with self._transaction():
            await self._db.execute(
                "INSERT OR REPLACE INTO transcript_refs (session_id, referenced_id, created_at)"
                " VALUES (?, ?, ?)",
                (session_id, referenced_id, time.time()),
            )
            await self._db.execute(
                "DELETE FROM transcript_refs WHERE session_id = ? AND referenced_id NOT IN"
                " (SELECT referenced_id FROM transcript_refs WHERE session_id = ?"
                " ORDER BY created_at DESC LIMIT ?)",
                (session_id, session_id, keep),
            )

    async def transcript_refs(self, session_id: str) -> list[str]:
        """The sessions referenced from ``session_id``, oldest first."""
        rows = await self._all(
            "SELECT referenced_id FROM transcript_refs WHERE session_id = ? ORDER BY created_at",
            (session_id,),
        )
        return [row[0] for row in rows]

    async def find_sessions(self, partner_id: str, id_prefix: str) -> list[SessionRow]:
        """A partner's sessions whose id starts with ``id_prefix`` (ids are shown shortened)."""
        return await self._sessions(
            "WHERE partner_id = ? AND substr(id, 1, ?) = ? ORDER BY created_at DESC LIMIT 2",
            (partner_id, len(id_prefix), id_prefix),
        )

    async def partner_sessions(
        self, partner_id: str, user_key: str | None = None, limit: int = 500
    ) -> list[SessionRow]:
        """A partner's sessions, newest activity first, optionally only one user's."""
        where = "WHERE partner_id = ?"
        params: list[Any] = [partner_id]
        if user_key is not None:
            where += " AND user_key = ?"
            params.append(user_key)
        return await self._sessions(
            where + " ORDER BY last_active_at DESC LIMIT ?", (*params, limit)
        )

    async def message_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Conversation messages (user and assistant) per session."""
        if not session_ids:
            return {}
        marks = ", ".join("?" for _ in session_ids)
        rows = await self._all(
            f"SELECT session_id, COUNT(*) FROM messages WHERE session_id IN ({marks})"
            " AND role IN ('user', 'assistant') GROUP BY session_id",
            tuple(session_ids),
        )
        return {row[0]: int(row[1]) for row in rows}

    async def partner_messages(self, partner_id: str) -> list[MessageRow]:
        """Every recorded message of a partner, session by session (for an export)."""
        return await self._messages(
            "WHERE partner_id = ? AND status != 'pending' ORDER BY session_id, id", (partner_id,)
        )

    async def tokens_on(self, day: str) -> dict[str, int]:
        """Tokens (prompt + completion) used on one day, per partner."""
        rows = await self._all(
            "SELECT partner_id, SUM(prompt_tokens + completion_tokens) FROM usage"
            " WHERE day = ? GROUP BY partner_id",
            (day,),
        )
        return {row[0]: int(row[1] or 0) for row in rows}

    async def user_messages_since(self, user_key: str, since: float) -> int:
        row = await self._one(
            "SELECT COUNT(*) FROM messages WHERE user_key = ? AND created_at >= ?"
            " AND role = 'user'",
            (user_key, since),
        )
        return int(row[0]) if row else 0

    async def last_rest_notice(self, kind: str, subject: str) -> float | None:
        row = await self._one(
            "SELECT sent_at FROM rest_notices WHERE kind = ? AND subject = ?", (kind, subject)
        )
        return float(row[0]) if row else None

    async def note_rest_notice(self, kind: str, subject: str) -> None:
        await self._write(
            "INSERT OR REPLACE INTO rest_notices (kind, subject, sent_at) VALUES (?, ?, ?)",
            (kind, subject, time.time()),
        )

    async def rest_notices_since(self, since: float) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT kind, subject, sent_at FROM rest_notices WHERE sent_at >= ? ORDER BY sent_at",
            (since,),
        )
        return [dict(row) for row in rows]

    async def close_unanswered(self, message_ids: Sequence[int], session_id: str) -> None:
        """Keep messages in their session's history without a reply (a resting partner)."""
        async with self._transaction():
            await self._db.executemany(
                "UPDATE messages SET status = 'done', session_id = ? WHERE id = ?",
                [(session_id, message_id) for message_id in message_ids],
            )

    async def reply_counts(self, since: float) -> dict[str, int]:
        """Replies recorded since a time: 'assistant' answers and 'notice' apologies."""
        rows = await self._all(
            "SELECT role, COUNT(*) FROM messages WHERE created_at >= ?"
            " AND role IN ('assistant', 'notice') GROUP BY role",
            (since,),
        )
        return {row[0]: int(row[1]) for row in rows}

    async def last_reviews(self) -> dict[str, float]:
        """When each partner's sessions were last reviewed."""
        rows = await self._all(
            "SELECT partner_id, MAX(reviewed_at) FROM sessions WHERE reviewed_at IS NOT NULL"
            " AND partner_id IS NOT NULL GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}

    async def last_activity(self) -> dict[str, float]:
        """When each partner last had a conversation."""
        rows = await self._all(
            "SELECT partner_id, MAX(last_active_at) FROM sessions WHERE partner_id IS NOT NULL"
            " GROUP BY partner_id"
        )
        return {row[0]: float(row[1]) for row in rows}

    # ---- owner claims and pairing decisions from the terminal ----------------------------

    async def add_claim_code(self, code_hash: str, platform: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO claim_codes (code_hash, platform, created_at, expires_at)"
            " VALUES (?, ?, ?, ?)",
            (code_hash, platform, now, now + ttl_seconds),
        )

    async def live_claim_codes(self, platform: str) -> list[str]:
        """Hashes of the codes that may still claim ``platform`` (unused, unexpired)."""
        rows = await self._all(
            "SELECT code_hash FROM claim_codes WHERE platform = ? AND used_at IS NULL"
            " AND expires_at > ?",
            (platform, time.time()),
        )
        return [row[0] for row in rows]

    async def redeem_claim(self, code_hash: str, platform: str, user_key: str) -> bool:
        """Make ``user_key`` the owner of ``platform`` with a live code, in one transaction:
        False if the code is no longer live or the platform has been claimed meanwhile. Every
        other code for the platform is used up with it."""
        now = time.time()
        async with self._transaction():
            taken = await self._db.execute_fetchall(
                "SELECT 1 FROM claimed_owners WHERE platform = ?", (platform,)
            )
            if list(taken):
                return False
            cursor = await self._db.execute(
                "UPDATE claim_codes SET used_at = ?, used_by = ? WHERE code_hash = ?"
                " AND platform = ? AND used_at IS NULL AND expires_at > ?",
                (now, user_key, code_hash, platform, now),
            )
            if cursor.rowcount != 1:
                return False
            await self._db.execute(
                "INSERT INTO claimed_owners (user_key, platform, claimed_at) VALUES (?, ?, ?)",
                (user_key, platform, now),
            )
            await self._db.execute(
                "UPDATE claim_codes SET used_at = ? WHERE platform = ? AND used_at IS NULL",
                (now, platform),
            )
        return True

    async def claimed_owners(self) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT user_key, platform, claimed_at FROM claimed_owners ORDER BY claimed_at"
        )
        return [dict(row) for row in rows]

    async def unannounced_approvals(self) -> list[dict[str, Any]]:
        """Pairing requests approved (from the terminal) whose user has not been told yet."""
        rows = await self._all(
            "SELECT * FROM pairing_requests WHERE status = 'approved' AND announced_at IS NULL"
            " ORDER BY created_at"
        )
        return [dict(row) for row in rows]

    async def take_announcement(self, code: str) -> bool:
        """Claim the telling of an approval: True for exactly one caller."""
        cursor = await self._write(
            "UPDATE pairing_requests SET announced_at = ? WHERE code = ?"
            " AND status = 'approved' AND announced_at IS NULL",
            (time.time(), code),
        )
        return cursor.rowcount == 1

    # ---- maintenance -----------------------------------------------------------------

    async def backup_to(self, target: Path) -> None:
        """A consistent copy of the live database (SQLite online backup)."""
        dest = await aiosqlite.connect(target)
        try:
            await self._db.backup(dest)
        finally:
            await dest.close()

    # ---- the owner's web page: login links, sessions, and what its pages list ------------

    async def add_web_login(self, token_hash: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO web_logins (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
            (token_hash, now, now + ttl_seconds),
        )

    async def redeem_web_login(
        self, token_hash: str, session_hash: str, csrf_token: str, ttl_seconds: float
    ) -> bool:
        """Use up a live login link and open a session with it, in one transaction: False
        when the link is unknown, expired or used already."""
        now = time.time()
        async with self._transaction():
            cursor = await self._db.execute(
                "UPDATE web_logins SET used_at = ? WHERE token_hash = ? AND used_at IS NULL"
                " AND expires_at > ?",
                (now, token_hash, now),
            )
            if cursor.rowcount != 1:
                return False
            await self._db.execute(
                "INSERT INTO web_sessions (session_hash, csrf_token, created_at, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (session_hash, csrf_token, now, now + ttl_seconds),
            )
            await self._db.execute("DELETE FROM web_logins WHERE expires_at < ?", (now,))
            await self._db.execute("DELETE FROM web_sessions WHERE expires_at < ?", (now,))
        return True

    async def web_session(self, session_hash: str) -> dict[str, Any] | None:
        """A live session (with its CSRF token), or None."""
        row = await self._one(
            "SELECT * FROM web_sessions WHERE session_hash = ? AND expires_at > ?",
            (session_hash, time.time()),
        )
        return dict(row) if row else None

    async def end_web_sessions(self, session_hash: str | None = None) -> int:
        """End one session, or (None) every session and every unused link."""
        if session_hash is not None:
            cursor = await self._write(
                "DELETE FROM web_sessions WHERE session_hash = ?", (session_hash,)
            )
            return cursor.rowcount
        async with self._transaction():
            cursor = await self._db.execute("DELETE FROM web_sessions")
            await self._db.execute("DELETE FROM web_logins WHERE used_at IS NULL")
        return cursor.rowcount

    async def web_users(self) -> list[dict[str, Any]]:
        """Every user the gateway has seen, newest first, with their check-in settings."""
        rows = await self._all("SELECT * FROM users ORDER BY updated_at DESC")
        users = [dict(row) for row in rows]
        checkins = await self._all("SELECT * FROM checkins ORDER BY partner_id")
        by_user: dict[str, list[dict[str, Any]]] = {}
        for row in checkins:
            by_user.setdefault(row["user_key"], []).append(dict(row))
        for user in users:
            user["checkins"] = by_user.get(user["user_key"], [])
        return users

    async def audit_page(
        self, search: str = "", before_id: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Audit rows newest first, ``limit`` at a time below ``before_id``; ``search``
        keeps rows whose actor or action contains it."""
        sql = "SELECT id, time, actor, action, detail FROM audit WHERE 1 = 1"
        params: list[Any] = []
        if search:
            sql += " AND (instr(lower(actor), ?) > 0 OR instr(lower(action), ?) > 0)"
            params += [search.lower(), search.lower()]
        if before_id is not None:
            sql += " AND id < ?"
            params.append(before_id)
        rows = [
            dict(row)
            for row in await self._all(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        ]
        for row in rows:
            row["detail"] = json.loads(row["detail"])
        return rows
