"""Step 10: index terms tagged with their audience, so a search reads only the doclists of the
audiences it may see; ``search_scopes`` lists a partner's audiences for shared-scope search.
SQLite recomputes the terms and rebuilds its FTS5 index and triggers."""

from bot.store.migrations.step import Dialects, Migration, Step

SQLITE = Migration(
    sql="""
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
)

POSTGRES = """
        CREATE TABLE search_scopes (
            partner_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            PRIMARY KEY (partner_id, scope)
        );
        CREATE FUNCTION messages_scoped() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO search_scopes (partner_id, scope) VALUES (NEW.partner_id, NEW.scope)
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$;
        CREATE TRIGGER messages_scoped AFTER INSERT ON messages FOR EACH ROW
        WHEN (NEW.terms IS NOT NULL AND NEW.partner_id IS NOT NULL AND NEW.scope IS NOT NULL)
        EXECUTE FUNCTION messages_scoped();
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
