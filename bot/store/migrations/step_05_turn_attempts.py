"""Step 5: nothing stays pending forever: failed turn attempts per inbound message."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    ALTER TABLE messages ADD COLUMN turn_attempts INTEGER NOT NULL DEFAULT 0;
    """

POSTGRES = """
    ALTER TABLE messages ADD COLUMN turn_attempts BIGINT NOT NULL DEFAULT 0;
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
