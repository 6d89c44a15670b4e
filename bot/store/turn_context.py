"""What a turn reads before the model runs, in one round trip (:class:`TurnContext`).

A DM turn used to ask the database seven times before its model call (the queue, the chat and
speaker, the open session, its history, the media of both, the reactions); each ask is a trip
to the database thread, and across the network once the store has a server backend. Here they
are one read on the database thread, made of the queries the single-purpose methods run.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, cast

from bot.store.admin_rows import UserRow
from bot.store.chats import CHAT_BY_KEY
from bot.store.connection import SqliteBase
from bot.store.leases import unfinished_replies
from bot.store.media import MEDIA_COLUMNS, by_message
from bot.store.messages import MESSAGE_COLUMNS, RECENT_REACTIONS
from bot.store.rows import ChatRow, MediaRow, MessageRow, SessionRow, TurnContext
from bot.store.sessions import SESSION_COLUMNS
from bot.store.users import USER_BY_KEY

CONVERSATION = (
    "WHERE session_id = ? AND role IN ('user', 'assistant') AND status != 'pending' ORDER BY id"
)
"""A session's history, as :meth:`Messages.session_messages` reads it by default."""

OPEN_SESSION = (
    "WHERE chat_key = ? AND partner_id IS ? AND ended_at IS NULL AND kind = 'chat'"
    " ORDER BY created_at DESC LIMIT 1"
)
"""The open conversation of a chat with a partner (None: the owner assistant)."""


class TurnContexts(SqliteBase):
    """The one read a turn starts with."""

    async def turn_context(self, queue_key: str, reactions: int) -> TurnContext:
        """The pending messages of ``queue_key`` and what answering them needs (see
        :class:`TurnContext`), with at most ``reactions`` reactions."""
        return await self._db.run(lambda db: _read(db, queue_key, reactions))


def _read(db: sqlite3.Connection, queue_key: str, reactions: int) -> TurnContext:
    unfinished = [
        int(row[0]) for row in db.execute(f"{unfinished_replies('?')} ORDER BY u.id", (queue_key,))
    ]
    pending = one_partner(
        _messages(db, "WHERE status = 'pending' AND queue_key = ? ORDER BY id", (queue_key,))
    )
    if not pending:
        return TurnContext(pending, unfinished=unfinished)
    last = pending[-1]
    chat = db.execute(CHAT_BY_KEY, (last.chat_key,)).fetchone()
    user = db.execute(USER_BY_KEY, (last.user_key,)).fetchone() if last.user_key else None
    row = db.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions {OPEN_SESSION}", (last.chat_key, last.partner_id)
    ).fetchone()
    session = SessionRow(*row) if row else None
    history = _messages(db, CONVERSATION, (session.id,)) if session else []
    carry_from = session.carry_from if session else None
    carried = _messages(db, CONVERSATION, (carry_from,)) if carry_from else []
    after = (history or carried)[-1].id if history or carried else 0
    recent = _messages(db, RECENT_REACTIONS, (last.chat_key, last.partner_id, after, reactions))
    return TurnContext(
        pending,
        chat=ChatRow(*chat) if chat else None,
        user=cast(UserRow, dict(user)) if user else None,
        session=session,
        history=history,
        carried=carried,
        media=_media(db, pending, [s for s in (session.id if session else None, carry_from) if s]),
        reactions=recent[::-1],
        reactions_after=after,
        unfinished=unfinished,
    )


def one_partner(pending: list[MessageRow]) -> list[MessageRow]:
    """The messages one turn answers: the oldest pending and those after it for the same
    partner, up to the first for another. Only a scene's key holds several partners' messages
    (``bot/workers/queue_keys.py``); every other key's are one partner's, all taken at once."""
    first = pending[0].partner_id if pending else None
    run = 0
    while run < len(pending) and pending[run].partner_id == first:
        run += 1
    return pending[:run]


def _messages(db: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[MessageRow]:
    rows = db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages {where}", params)
    return [MessageRow(*row) for row in rows]


def _media(
    db: sqlite3.Connection, pending: list[MessageRow], session_ids: list[str]
) -> dict[int, list[MediaRow]]:
    """The media of the pending messages and of every message of these sessions (by a
    subquery: a long history's ids would pass SQLite's limit on variables)."""
    pending_marks = ", ".join("?" for _ in pending)
    session_marks = ", ".join("?" for _ in session_ids) or "NULL"
    rows = db.execute(
        f"SELECT {MEDIA_COLUMNS} FROM media WHERE message_id IN ({pending_marks}) OR message_id"
        f" IN (SELECT id FROM messages WHERE session_id IN ({session_marks})) ORDER BY rowid",
        (*(row.id for row in pending), *session_ids),
    )
    return by_message(rows)
