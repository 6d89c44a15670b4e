"""Step 26: the questions a turn put to a person before an MCP tool marked ``confirm`` runs,
and their answers. The answer is recorded by whichever worker the person's press or reply
reaches, and read by the worker whose turn is waiting for it. A row names the chat and the
person, never the call: the question's text was sent, not kept."""

from bot.store.migrations.step import Dialects, Step

SQLITE = """
        CREATE TABLE confirmations (
            id TEXT PRIMARY KEY,
            chat_key TEXT NOT NULL,
            user_key TEXT NOT NULL,
            asked_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            answer INTEGER,
            answered_at REAL
        );
        CREATE INDEX confirmations_waiting ON confirmations (chat_key, user_key, expires_at);
        CREATE INDEX confirmations_expiry ON confirmations (expires_at);
        """

POSTGRES = """
        CREATE TABLE confirmations (
            id TEXT PRIMARY KEY,
            chat_key TEXT NOT NULL,
            user_key TEXT NOT NULL,
            asked_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            answer BIGINT,
            answered_at DOUBLE PRECISION
        );
        CREATE INDEX confirmations_waiting ON confirmations (chat_key, user_key, expires_at);
        CREATE INDEX confirmations_expiry ON confirmations (expires_at);
        """

STEP: Step = Dialects(sqlite=SQLITE, postgres=POSTGRES)
