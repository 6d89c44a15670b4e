"""Step 23: the ``pending_stored`` trigger of step 17 goes: PostgreSQL wakes listening workers
after a pending message's insert committed, from the store (``bot/store/postgres/wakeups.py``),
no longer from a trigger inside the insert. NOTIFY in a transaction takes a database-wide lock
at its commit and holds it through the commit's flush, so every inbound insert committed one at
a time (bench/notify.py: 64 writers stored 0.41-0.62x as many messages per second as with no
NOTIFY at all)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """-- nothing: SQLite has one worker and no notifications"""

POSTGRES = """
        DROP TRIGGER pending_stored ON messages;
        DROP FUNCTION pending_stored();
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
