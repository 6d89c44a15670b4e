"""Step 21: the embedder's watermark on PostgreSQL, where ids are taken when a row is inserted
but rows become visible when they commit: the highest id seen and when (the database's clock),
which the watermark reaches once every transaction begun by then has ended, and the messages
past the watermark the endpoint refused (not to be sent again meanwhile). SQLite commits one
writer at a time, so its ids become visible in order: it leaves the columns empty (a copy to
PostgreSQL reads the same columns) and needs no such table."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
        ALTER TABLE embedding_progress ADD COLUMN seen_upto INTEGER;
        ALTER TABLE embedding_progress ADD COLUMN seen_at REAL;
        """

POSTGRES = """
        CREATE TABLE embedding_skipped (message_id BIGINT PRIMARY KEY);
        ALTER TABLE embedding_progress ADD COLUMN seen_upto BIGINT;
        ALTER TABLE embedding_progress ADD COLUMN seen_at DOUBLE PRECISION;
        CREATE OR REPLACE FUNCTION vectors_outdated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM message_vectors WHERE message_id = NEW.id;
            DELETE FROM embedding_skipped WHERE message_id = NEW.id;
            IF NEW.terms IS NOT NULL THEN
                INSERT INTO embedding_redo (message_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
            END IF;
            RETURN NULL;
        END $$;
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
