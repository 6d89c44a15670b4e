"""Step 19: a worker's liveness on PostgreSQL: the key of the advisory lock its own connection
holds for as long as it lives, and when (the database's clock) it took it. A worker whose lock
nobody holds any more died, and what it held is free at once (SQLite has one worker and leaves
both empty)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    ALTER TABLE workers ADD COLUMN liveness_key INTEGER;
    ALTER TABLE workers ADD COLUMN liveness_at REAL;
    """

POSTGRES = """
    ALTER TABLE workers ADD COLUMN liveness_key BIGINT;
    ALTER TABLE workers ADD COLUMN liveness_at DOUBLE PRECISION;
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
