"""Step 13: semantic recall. One vector per searchable message (journal entries are messages
too), with the model that made it (vectors of two models are never compared) and the message's
scope token copied for the search's index. ``embedding_progress`` is how far the background
embedder has read each model's messages; ``embedding_redo`` lists messages whose text changed
after they were read (a transcript replacing a placeholder). A deleted message takes its vector
with it, in the same statement (forgetting is forgetting)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
        """

POSTGRES = """
        CREATE TABLE message_vectors (
            message_id BIGINT PRIMARY KEY,
            model TEXT NOT NULL,
            dim BIGINT NOT NULL,
            scope TEXT NOT NULL,
            vector BYTEA NOT NULL
        );
        CREATE INDEX message_vectors_scope ON message_vectors (scope, model, message_id);
        CREATE TABLE embedding_progress (
            model TEXT PRIMARY KEY,
            upto BIGINT NOT NULL
        );
        CREATE TABLE embedding_redo (
            message_id BIGINT PRIMARY KEY
        );
        CREATE FUNCTION vectors_removed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM message_vectors WHERE message_id = OLD.id;
            DELETE FROM embedding_redo WHERE message_id = OLD.id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER vectors_removed AFTER DELETE ON messages FOR EACH ROW
        EXECUTE FUNCTION vectors_removed();
        CREATE FUNCTION vectors_outdated() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM message_vectors WHERE message_id = NEW.id;
            IF NEW.terms IS NOT NULL THEN
                INSERT INTO embedding_redo (message_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER vectors_outdated AFTER UPDATE OF text ON messages FOR EACH ROW
        WHEN (OLD.text IS DISTINCT FROM NEW.text) EXECUTE FUNCTION vectors_outdated();
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
