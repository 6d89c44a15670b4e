"""Step 8: stemmed search terms in each partner's language. SQLite re-indexes every message (its
terms are recomputed in Python); a PostgreSQL database starts at the current terms."""

from bot.store.migrations.step import Dialects, Migration, Step

SQLITE = Migration(
    sql="""
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
)

POSTGRES = """
        -- a PostgreSQL database starts at the current terms: nothing to recompute
        CREATE TABLE search_languages (
            partner_id TEXT PRIMARY KEY,
            language TEXT NOT NULL
        );
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
