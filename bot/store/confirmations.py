"""Questions put to people before a tool call, and their answers. One query text for both
backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.base import StoreBase, Transaction
from bot.store.rows import ConfirmationRow

COLUMNS = "id, chat_key, user_key, asked_at, expires_at, answer"
WAITING = "chat_key = ? AND user_key = ? AND answer IS NULL AND expires_at > ?"
"""This person's question in this chat, still open at a time."""


class PendingConfirmations(StoreBase):
    """Questions waiting for a person's yes or no."""

    async def add_confirmation(self, question: ConfirmationRow, forget_before: float) -> bool:
        async def add(tx: Transaction) -> bool:
            await tx.write("DELETE FROM confirmations WHERE expires_at < ?", forget_before)
            waiting = await tx.value(
                f"SELECT count(*) FROM confirmations WHERE {WAITING}",
                question.chat_key,
                question.user_key,
                question.asked_at,
            )
            if waiting:
                return False
            await tx.write(
                "INSERT INTO confirmations (id, chat_key, user_key, asked_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?)",
                question.id,
                question.chat_key,
                question.user_key,
                question.asked_at,
                question.expires_at,
            )
            return True

        return await self._atomically(add)

    async def confirmation(self, confirmation_id: str) -> ConfirmationRow | None:
        row = await self._one(f"SELECT {COLUMNS} FROM confirmations WHERE id = ?", confirmation_id)
        return None if row is None else row_of(row)

    async def open_confirmation(
        self, chat_key: str, user_key: str, now: float
    ) -> ConfirmationRow | None:
        row = await self._one(
            f"SELECT {COLUMNS} FROM confirmations WHERE {WAITING} ORDER BY asked_at LIMIT 1",
            chat_key,
            user_key,
            now,
        )
        return None if row is None else row_of(row)

    async def answer_confirmation(self, confirmation_id: str, answer: bool, now: float) -> bool:
        changed = await self._write(
            "UPDATE confirmations SET answer = ?, answered_at = ?"
            " WHERE id = ? AND answer IS NULL AND expires_at > ?",
            int(answer),
            now,
            confirmation_id,
            now,
        )
        return changed == 1


def row_of(row: Sequence[Any]) -> ConfirmationRow:
    """A :data:`COLUMNS` row (SQLite keeps the answer as 0 or 1)."""
    confirmation_id, chat_key, user_key, asked_at, expires_at, answer = row[:6]
    return ConfirmationRow(
        confirmation_id,
        chat_key,
        user_key,
        float(asked_at),
        float(expires_at),
        None if answer is None else bool(answer),
    )
