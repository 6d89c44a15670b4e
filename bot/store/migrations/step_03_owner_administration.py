"""Step 3: owner administration: referenced transcripts, "resting" notices, review times."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
    """

POSTGRES = """
    CREATE TABLE transcript_refs (
        session_id TEXT NOT NULL,
        referenced_id TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, referenced_id)
    );
    CREATE TABLE rest_notices (
        kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        sent_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (kind, subject)
    );
    CREATE INDEX messages_user_time ON messages (user_key, created_at);
    ALTER TABLE sessions ADD COLUMN reviewed_at DOUBLE PRECISION;
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
