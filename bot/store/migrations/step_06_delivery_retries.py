"""Step 6: replies the platform refused for now, with their next attempt; a row lives only while
its reply is being delivered (triggers drop it when the reply settles or is deleted)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
        """

POSTGRES = """
        CREATE TABLE delivery_retries (
            message_id BIGINT PRIMARY KEY,
            attempts BIGINT NOT NULL,
            first_failed_at DOUBLE PRECISION NOT NULL,
            next_attempt_at DOUBLE PRECISION NOT NULL,
            last_error TEXT NOT NULL
        );
        CREATE INDEX delivery_retries_due ON delivery_retries (next_attempt_at);
        CREATE FUNCTION delivery_retry_settled() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM delivery_retries WHERE message_id = OLD.id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER delivery_retry_settled AFTER UPDATE OF status ON messages FOR EACH ROW
        WHEN (OLD.status = 'delivering' AND NEW.status != 'delivering')
        EXECUTE FUNCTION delivery_retry_settled();
        CREATE TRIGGER delivery_retry_removed AFTER DELETE ON messages FOR EACH ROW
        WHEN (OLD.status = 'delivering') EXECUTE FUNCTION delivery_retry_settled();
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
