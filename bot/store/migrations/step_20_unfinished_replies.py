"""Step 20: a turn's reply belongs to its queue key; one whose delivery was cut off (an outage,
a lost lease, a dead worker) keeps the key claimable until its holder finished it, so every
sweep and every turn asks for a key's unfinished replies: an index for that question."""

from bot.store.migrations.step import Step

STEP: Step = (
    """CREATE INDEX messages_unfinished ON messages (queue_key, id) WHERE status = 'delivering';"""
)
