"""Step 4: platform updates the gateway could not read are recorded as rejected."""

from bot.store.migrations.step import Step

STEP: Step = """
    ALTER TABLE seen_updates ADD COLUMN status TEXT NOT NULL DEFAULT 'handled';
    """
