"""Step 17: several workers on one database (docs/architecture.md "Several workers"): the
registry of running workers, the leader row (the poller, the scheduler and command sync run on
one worker; its epoch fences leader-only writes), a lease with a fencing epoch per queue key
(kept after release, so an epoch never repeats), and the scheduled job runs recorded under the
leader's epoch so no job runs twice across a failover. PostgreSQL also woke listening workers
from a trigger when a pending message was stored (dropped again by step 23)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    CREATE TABLE workers (
        worker_id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    );
    CREATE TABLE leader (
        name TEXT PRIMARY KEY,
        worker_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE TABLE chat_leases (
        queue_key TEXT PRIMARY KEY,
        worker_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE INDEX chat_leases_worker ON chat_leases (worker_id);
    CREATE TABLE job_runs (
        job TEXT NOT NULL,
        due TEXT NOT NULL,
        worker_id TEXT NOT NULL,
        leader_epoch INTEGER NOT NULL,
        ran_at REAL NOT NULL,
        PRIMARY KEY (job, due)
    );
"""

POSTGRES = """
    CREATE TABLE workers (
        worker_id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid BIGINT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        heartbeat_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE leader (
        name TEXT PRIMARY KEY,
        worker_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE chat_leases (
        queue_key TEXT PRIMARY KEY,
        worker_id TEXT NOT NULL,
        epoch BIGINT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX chat_leases_worker ON chat_leases (worker_id);
    CREATE TABLE job_runs (
        job TEXT NOT NULL,
        due TEXT NOT NULL,
        worker_id TEXT NOT NULL,
        leader_epoch BIGINT NOT NULL,
        ran_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (job, due)
    );

        CREATE FUNCTION pending_stored() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('companion_pending', NEW.queue_key);
            RETURN NULL;
        END $$;
        CREATE TRIGGER pending_stored AFTER INSERT ON messages FOR EACH ROW
        WHEN (NEW.status = 'pending' AND NEW.queue_key IS NOT NULL)
        EXECUTE FUNCTION pending_stored();
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
