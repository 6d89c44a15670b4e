"""Step 1: the core tables: users, chats, bindings, sessions, messages and their delivery, seen
platform updates, usage, audit, pairing requests and settings; on SQLite also the FTS5 search
index over the messages and its triggers (PostgreSQL's search index comes in step 16)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
"""

POSTGRES = """
    CREATE TABLE users (
        user_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        platform_user_id TEXT NOT NULL,
        display_name TEXT NOT NULL DEFAULT '',
        username TEXT,
        access TEXT NOT NULL DEFAULT 'unknown',
        timezone TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE chats (
        chat_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        platform_chat_id TEXT NOT NULL,
        thread_id TEXT,
        kind TEXT NOT NULL,
        title TEXT,
        selected_partner TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE bindings (
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        partner_id TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
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
        created_at DOUBLE PRECISION NOT NULL,
        last_active_at DOUBLE PRECISION NOT NULL,
        ended_at DOUBLE PRECISION,
        end_reason TEXT,
        reviewed_upto BIGINT NOT NULL DEFAULT 0,
        review_attempts BIGINT NOT NULL DEFAULT 0,
        review_error TEXT,
        review_due_at DOUBLE PRECISION
    );
    CREATE INDEX sessions_review_due ON sessions (review_due_at)
        WHERE review_due_at IS NOT NULL;
    CREATE INDEX sessions_open ON sessions (chat_key, partner_id) WHERE ended_at IS NULL;
    CREATE TABLE messages (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
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
        answers_upto BIGINT,
        created_at DOUBLE PRECISION NOT NULL,
        terms TEXT,
        scope TEXT
    );
    CREATE INDEX messages_pending ON messages (queue_key, id) WHERE status = 'pending';
    CREATE INDEX messages_delivering ON messages (id) WHERE status = 'delivering';
    CREATE INDEX messages_session ON messages (session_id, id);
    CREATE INDEX messages_chat ON messages (chat_key, id);
    CREATE TABLE deliveries (
        message_id BIGINT NOT NULL,
        chunk BIGINT NOT NULL,
        platform_message_id TEXT,
        sent_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (message_id, chunk)
    );
    CREATE TABLE seen_updates (
        platform TEXT NOT NULL,
        update_id TEXT NOT NULL,
        seen_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (platform, update_id)
    );
    CREATE TABLE usage (
        day TEXT NOT NULL,
        partner_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        model TEXT NOT NULL,
        calls BIGINT NOT NULL DEFAULT 0,
        prompt_tokens BIGINT NOT NULL DEFAULT 0,
        completion_tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (day, partner_id, kind, model)
    );
    CREATE TABLE audit (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        time DOUBLE PRECISION NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE TABLE pairing_requests (
        code TEXT PRIMARY KEY,
        user_key TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending'
    );
    CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    );
"""

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
