"""The database schema as a list of versioned steps, applied in order when a store opens
(``PRAGMA user_version`` counts the steps applied). A step is SQL, or a :class:`Migration` when
stored rows must be recomputed in Python (search terms are made there). Append new steps at
the end; never edit one that has shipped."""

from __future__ import annotations

from dataclasses import dataclass


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
    # 13: semantic recall. One vector per searchable message (journal entries are messages
    # too), with the model that made it (vectors of two models are never compared) and the
    # message's scope token copied for the search's index. embedding_progress is how far the
    # background embedder has read each model's messages; embedding_redo lists messages whose
    # text changed after they were read (a transcript replacing a placeholder). A deleted
    # message takes its vector with it, in the same statement (forgetting is forgetting).
    """
    CREATE TABLE message_vectors (
        message_id INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        dim INTEGER NOT NULL,
        scope TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE INDEX message_vectors_scope ON message_vectors (scope, model, message_id);
    CREATE TABLE embedding_progress (
        model TEXT PRIMARY KEY,
        upto INTEGER NOT NULL
    );
    CREATE TABLE embedding_redo (
        message_id INTEGER PRIMARY KEY
    );
    CREATE TRIGGER vectors_removed AFTER DELETE ON messages BEGIN
        DELETE FROM message_vectors WHERE message_id = old.id;
        DELETE FROM embedding_redo WHERE message_id = old.id;
    END;
    CREATE TRIGGER vectors_outdated AFTER UPDATE OF text ON messages
    WHEN old.text IS NOT new.text BEGIN
        DELETE FROM message_vectors WHERE message_id = new.id;
        INSERT OR IGNORE INTO embedding_redo (message_id)
        SELECT new.id WHERE new.terms IS NOT NULL;
    END;
    """,
    # 14: the owner's web page: one-time login links and browser sessions, both kept only as
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
    # 15: the vector log, by which the in-memory vector cache learns what changed since it
    # read the vectors: every vector stored, replaced or deleted (by whatever path: a
    # forgotten message's delete trigger, a changed text, a new model), and every message with
    # a vector that enters or leaves 'pending' (searches skip pending messages), logs the
    # message's id. Ids only, never text; the oldest entries are pruned (see save_vectors).
    """
    CREATE TABLE vector_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id INTEGER NOT NULL
    );
    CREATE TRIGGER vector_log_stored AFTER INSERT ON message_vectors BEGIN
        INSERT INTO vector_log (message_id) VALUES (new.message_id);
    END;
    CREATE TRIGGER vector_log_replaced AFTER UPDATE ON message_vectors BEGIN
        INSERT INTO vector_log (message_id) VALUES (new.message_id);
    END;
    CREATE TRIGGER vector_log_deleted AFTER DELETE ON message_vectors BEGIN
        INSERT INTO vector_log (message_id) VALUES (old.message_id);
    END;
    CREATE TRIGGER vector_log_status AFTER UPDATE OF status ON messages
    WHEN (old.status = 'pending') IS NOT (new.status = 'pending') BEGIN
        INSERT INTO vector_log (message_id)
        SELECT message_id FROM message_vectors WHERE message_id = new.id;
    END;
    """,
]
