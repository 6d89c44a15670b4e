"""Step 18: memory documents as rows (persona, memory, per-user files, journals, changelog), for
workers that share nothing but the database; with files they stay files. A namespace is the
document's root relative to the data directory ("partners/luna"), the path is relative to it
("users/telegram_7.md"); version counts the writes."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    CREATE TABLE documents (
        namespace TEXT NOT NULL,
        path TEXT NOT NULL,
        content BLOB NOT NULL,
        version INTEGER NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (namespace, path)
    );
    """

POSTGRES = """
    CREATE TABLE documents (
        namespace TEXT NOT NULL,
        path TEXT NOT NULL,
        content BYTEA NOT NULL,
        version BIGINT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (namespace, path)
    );
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
