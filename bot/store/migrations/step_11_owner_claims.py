"""Step 11: owners who claimed a platform with a one-time code; approvals told to the user."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    CREATE TABLE claim_codes (
        code_hash TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL,
        used_by TEXT
    );
    CREATE TABLE claimed_owners (
        user_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL UNIQUE,
        claimed_at REAL NOT NULL
    );
    ALTER TABLE pairing_requests ADD COLUMN announced_at REAL;
    UPDATE pairing_requests SET announced_at = created_at WHERE status = 'approved';
    """

POSTGRES = """
    CREATE TABLE claim_codes (
        code_hash TEXT PRIMARY KEY,
        platform TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION,
        used_by TEXT
    );
    CREATE TABLE claimed_owners (
        user_key TEXT PRIMARY KEY,
        platform TEXT NOT NULL UNIQUE,
        claimed_at DOUBLE PRECISION NOT NULL
    );
    ALTER TABLE pairing_requests ADD COLUMN announced_at DOUBLE PRECISION;
    UPDATE pairing_requests SET announced_at = created_at WHERE status = 'approved';
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
