"""Confirmations: the questions turns put to people before an MCP tool marked ``confirm`` runs,
answered on whichever worker the answer reaches (``bot/turn/confirmations.py``).

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.confirmations.PendingConfirmations`."""

from __future__ import annotations

from typing import Protocol

from bot.store.rows import ConfirmationRow


class ConfirmationsStore(Protocol):
    """Questions waiting for a person's yes or no."""

    async def add_confirmation(self, question: ConfirmationRow, forget_before: float) -> bool:
        """Record ``question``; False (nothing recorded) when that person already has one
        open in that chat. Questions that expired before ``forget_before`` are removed."""

    async def confirmation(self, confirmation_id: str) -> ConfirmationRow | None:
        """The question with this id, answered or not; None once removed (or never asked)."""

    async def open_confirmation(
        self, chat_key: str, user_key: str, now: float
    ) -> ConfirmationRow | None:
        """The question waiting for this person's answer in this chat at ``now``, if any."""

    async def answer_confirmation(self, confirmation_id: str, answer: bool, now: float) -> bool:
        """Record the answer to a question still open at ``now``; False when it was
        answered already or has expired (the first answer stands)."""
