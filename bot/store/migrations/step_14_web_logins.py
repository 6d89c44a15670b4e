"""Step 14: the owner's web page: one-time login links and browser sessions, both kept only as
hashes of their secrets (a copy of the database logs nobody in)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
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
    """

POSTGRES = """
    CREATE TABLE web_logins (
        token_hash TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION
    );
    CREATE TABLE web_sessions (
        session_hash TEXT PRIMARY KEY,
        csrf_token TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
