"""Step 27: the tokens spent in each group's scene per day, on the group's own calendar, for
the group's daily budget (``scene.daily_token_budget``): scene turns and speak-gate calls book
here as well as in ``usage`` (per partner, kind and model), in the same transaction. Keyed by
the group first, as every table a turn touches is (docs/architecture.md)."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
    CREATE TABLE group_usage (
        group_key TEXT NOT NULL,
        day TEXT NOT NULL,
        tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (group_key, day)
    );
    """

POSTGRES = """
    CREATE TABLE group_usage (
        group_key TEXT NOT NULL,
        day TEXT NOT NULL,
        tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (group_key, day)
    );
    """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
