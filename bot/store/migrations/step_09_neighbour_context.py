"""Step 9: neighbour context: each conversation message is also indexed with the terms of the
message before and after it in the same thread (chat, partner and audience: so a neighbour is
always one the same people may see), in lower-weighted columns. The columns are filled before
the new index exists, so each message is indexed once. SQLite rebuilds its FTS5 index and
triggers (a trigger cannot be altered); PostgreSQL adds a trigger that fills the "after"."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
        """

POSTGRES = """
        ALTER TABLE messages ADD COLUMN before_terms TEXT;
        ALTER TABLE messages ADD COLUMN after_terms TEXT;
        CREATE INDEX messages_thread ON messages (chat_key, partner_id, audience, id)
            WHERE terms IS NOT NULL AND role IN ('user', 'assistant', 'context');
        -- a new message becomes the "after" of the one before it in its thread; the insert
        -- itself carries its "before"
        CREATE FUNCTION messages_threaded() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE messages SET after_terms = NEW.terms WHERE id = (
                SELECT id FROM messages WHERE chat_key = NEW.chat_key
                AND partner_id = NEW.partner_id AND audience = NEW.audience
                AND terms IS NOT NULL AND role IN ('user', 'assistant', 'context')
                AND id < NEW.id ORDER BY id DESC LIMIT 1
            );
            RETURN NULL;
        END $$;
        CREATE TRIGGER messages_threaded AFTER INSERT ON messages FOR EACH ROW
        WHEN (NEW.terms IS NOT NULL AND NEW.role IN ('user', 'assistant', 'context'))
        EXECUTE FUNCTION messages_threaded();
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
