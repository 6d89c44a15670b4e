"""What a turn reads before the model runs, on PostgreSQL: one statement, so one round trip
(see :mod:`bot.store.turn_context`, whose SQLite twin this is). Each part is a common table
expression; the rows of each come back as an array of anonymous records, which asyncpg hands
over as tuples in the columns' own types."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from bot.store.admin_rows import UserRow
from bot.store.leases import unfinished_replies
from bot.store.media import MEDIA_COLUMNS
from bot.store.messages import MESSAGE_COLUMNS
from bot.store.postgres.base import PostgresBase
from bot.store.rows import ChatRow, MediaRow, MessageRow, SessionRow, TurnContext
from bot.store.sessions import SESSION_COLUMNS

CHAT_COLUMNS = "chat_key, platform, platform_chat_id, thread_id, kind, title, selected_partner"
MEDIA_ORDER = "x.seq"
"""The order media rows were stored in, as ``media_for`` reads them."""


def _row(alias: str, columns: str) -> str:
    """``ROW(a.x, a.y, …)``: one record of ``columns`` of the table aliased ``alias``."""
    return "ROW(" + ", ".join(f"{alias}.{c}" for c in columns.split(", ")) + ")"


MESSAGES = f"array_agg({_row('m', MESSAGE_COLUMNS)} ORDER BY m.id)"
TURN_CONTEXT = f"""
WITH queued AS (
    SELECT * FROM messages WHERE status = 'pending' AND queue_key = $1
), first AS (
    SELECT partner_id, id FROM queued ORDER BY id LIMIT 1
), pending AS (
    SELECT q.* FROM queued q, first f WHERE q.id < coalesce((SELECT min(o.id) FROM queued o
    WHERE o.partner_id IS DISTINCT FROM f.partner_id), 9223372036854775807)
), last AS (
    SELECT * FROM pending ORDER BY id DESC LIMIT 1
), open AS (
    SELECT s.* FROM sessions s JOIN last ON s.chat_key = last.chat_key
    AND s.partner_id IS NOT DISTINCT FROM last.partner_id
    WHERE s.ended_at IS NULL AND s.kind = 'chat' ORDER BY s.created_at DESC LIMIT 1
), history AS (
    SELECT m.* FROM messages m JOIN open ON m.session_id = open.id
    WHERE m.role IN ('user', 'assistant') AND m.status != 'pending'
), carried AS (
    SELECT m.* FROM messages m JOIN open ON m.session_id = open.carry_from
    WHERE m.role IN ('user', 'assistant') AND m.status != 'pending'
), after AS (
    SELECT coalesce((SELECT max(id) FROM history), (SELECT max(id) FROM carried), 0) AS id
), reactions AS (
    SELECT m.* FROM messages m, last, after WHERE m.chat_key = last.chat_key
    AND m.partner_id IS NOT DISTINCT FROM last.partner_id AND m.role = 'reaction'
    AND m.id > after.id ORDER BY m.id DESC LIMIT $2
)
SELECT
    (SELECT {MESSAGES} FROM pending m) AS pending,
    (SELECT {_row("c", CHAT_COLUMNS)} FROM chats c JOIN last ON c.chat_key = last.chat_key)
        AS chat,
    (SELECT to_jsonb(u)::text FROM users u JOIN last ON u.user_key = last.user_key) AS person,
    (SELECT {_row("s", SESSION_COLUMNS)} FROM open s) AS session,
    (SELECT {MESSAGES} FROM history m) AS history,
    (SELECT {MESSAGES} FROM carried m) AS carried,
    (SELECT {MESSAGES} FROM reactions m) AS reactions,
    (SELECT id FROM after) AS after,
    (SELECT array_agg(id ORDER BY id) FROM ({unfinished_replies("$1")}) u) AS unfinished,
    (SELECT array_agg({_row("x", MEDIA_COLUMNS)} ORDER BY {MEDIA_ORDER}) FROM media x
        WHERE x.message_id IN (SELECT id FROM pending) OR x.message_id IN (SELECT id FROM messages
        WHERE session_id IN (SELECT id FROM open UNION ALL SELECT carry_from FROM open)))
        AS media
"""


class TurnContexts(PostgresBase):
    """The one read a turn starts with."""

    async def turn_context(self, queue_key: str, reactions: int) -> TurnContext:
        """The pending messages of ``queue_key`` and what answering them needs (see
        :class:`TurnContext`), with at most ``reactions`` reactions."""
        row = await self._one(TURN_CONTEXT, queue_key, reactions)
        assert row is not None  # a SELECT without FROM always yields a row
        pending = _messages(row["pending"])
        unfinished = [int(message_id) for message_id in row["unfinished"] or ()]
        if not pending:
            return TurnContext(pending, unfinished=unfinished)
        media: dict[int, list[MediaRow]] = {}
        for item in row["media"] or ():
            media.setdefault(int(item[0]), []).append(MediaRow(*item))
        return TurnContext(
            pending,
            chat=ChatRow(*row["chat"]) if row["chat"] else None,
            user=cast(UserRow, json.loads(row["person"])) if row["person"] else None,
            session=SessionRow(*row["session"]) if row["session"] else None,
            history=_messages(row["history"]),
            carried=_messages(row["carried"]),
            media=media,
            reactions=_messages(row["reactions"]),
            reactions_after=int(row["after"]),
            unfinished=unfinished,
        )


def _messages(rows: Sequence[tuple[Any, ...]] | None) -> list[MessageRow]:
    return [MessageRow(*row) for row in rows or ()]
