"""Step 12: voice and images. A message's media are referenced by platform file id (never their
bytes); a reply's actions (reactions, stickers, speaking it) wait here for delivery. Deleting a
message (/forget history) takes its media references with it."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
        """

POSTGRES = """
        CREATE TABLE media (
            message_id BIGINT NOT NULL,
            kind TEXT NOT NULL,
            ref TEXT NOT NULL,
            mime TEXT,
            seconds DOUBLE PRECISION,
            bytes BIGINT,
            filename TEXT,
            state TEXT NOT NULL DEFAULT 'new',
            PRIMARY KEY (message_id, kind, ref)
        );
        CREATE FUNCTION media_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM media WHERE message_id = OLD.id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER media_removed AFTER DELETE ON messages FOR EACH ROW
        EXECUTE FUNCTION media_removed();
        ALTER TABLE users ADD COLUMN voice_mode TEXT;
        ALTER TABLE usage ADD COLUMN units DOUBLE PRECISION NOT NULL DEFAULT 0;
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
