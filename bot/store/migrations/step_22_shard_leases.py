"""Step 22: leases on the Discord bot's shards, divided among the workers through the database
as queue keys are (docs/architecture.md "Several workers": Discord shards are leases too). A bot
with another shard count has other shards, so the count is part of the key. A worker that takes
a share of them names the bot's shard count in its registry row (NULL: it takes none, e.g. a
worker without Discord or one given its shards by the operator)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    ALTER TABLE workers ADD COLUMN shard_count INTEGER;
    CREATE TABLE shard_leases (
        shard_count INTEGER NOT NULL,
        shard_id INTEGER NOT NULL,
        worker_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (shard_count, shard_id)
    );
    CREATE INDEX shard_leases_worker ON shard_leases (worker_id);
    """

POSTGRES = """
    ALTER TABLE workers ADD COLUMN shard_count BIGINT;
    CREATE TABLE shard_leases (
        shard_count BIGINT NOT NULL,
        shard_id BIGINT NOT NULL,
        worker_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (shard_count, shard_id)
    );
    CREATE INDEX shard_leases_worker ON shard_leases (worker_id);
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
