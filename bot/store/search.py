"""History search on SQLite: the FTS5 index over messages, kept in the partner's language.

Terms are made in Python (:mod:`bot.store.search_terms`: folding, stems, CJK bigrams) and
stored on each message row; triggers copy them into the ``message_index`` FTS5 table. Each
row also carries its neighbours' terms (``before_terms``/``after_terms``), weighted lower,
so an answer is found by the question before it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.base import Transaction
from bot.store.connection import SqliteBase
from bot.store.search_rows import SearchHit
from bot.store.search_terms import match_expression
from bot.store.searchable import (
    CONTEXT_WEIGHT,
    REINDEX_BATCH,
    THREAD_ROLES,
    SearchableMessages,
    audience_token,
    term_tag,
)


class SearchIndex(SearchableMessages, SqliteBase):
    """Search, each partner's search language, and the upkeep of index terms."""

    async def search(
        self,
        partner_id: str,
        query: str,
        audiences: Sequence[str] | None,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[SearchHit]:
        """Best matches first (BM25, newer first on ties) among the given audiences.

        ``audiences=None`` searches all of the partner's history (shared memory scope).
        ``since``/``until`` (epoch seconds, until exclusive) and ``speaker`` (a name, any
        case) narrow the messages searched.
        """
        scopes = await self.search_scopes(partner_id, audiences)
        tags = [term_tag(scope) for scope in scopes]
        expression = match_expression(query, self._language(partner_id), tags)
        if expression is None or not scopes:
            return []
        tokens = " OR ".join(f'"{scope}"' for scope in scopes)
        terms = f"scope : ({tokens}) AND {{terms before_terms after_terms}} : ({expression})"
        sql = (
            "SELECT m.id, COALESCE(s.title, ''), m.role, m.text, m.created_at,"
            " m.platform_message_id, -bm25(message_index, 1.0, 0.0, ?, ?) AS score, m.speaker"
            " FROM message_index"
            " JOIN messages m ON m.id = message_index.rowid"
            " LEFT JOIN sessions s ON s.id = m.session_id"
            " WHERE message_index MATCH ? AND m.partner_id = ? AND m.status != 'pending'"
            " AND m.created_at >= COALESCE(?, m.created_at)"
            " AND m.created_at < COALESCE(?, m.created_at + 1)"
            " AND m.speaker = COALESCE(?, m.speaker) COLLATE NOCASE"
            " ORDER BY score DESC, m.created_at DESC LIMIT ?"
        )
        params = (
            CONTEXT_WEIGHT, CONTEXT_WEIGHT, terms, partner_id, since, until, speaker, limit
        )  # fmt: skip
        return [SearchHit(*row) for row in await self._sqlite_all(sql, params)]

    async def search_scopes(self, partner_id: str, audiences: Sequence[str] | None) -> list[str]:
        """The scope tokens of the audiences a search may see (None: all of the partner's)."""
        if audiences is None:
            rows = await self._sqlite_all(
                "SELECT scope FROM search_scopes WHERE partner_id = ?", (partner_id,)
            )
            return [row[0] for row in rows]
        return [audience_token(partner_id, a) for a in audiences]

    async def set_search_language(self, partner_id: str, language: str) -> int:
        """Stem this partner's history in ``language`` from now on (a Snowball name, see
        ``search_language``); a change re-indexes what is stored. Returns messages re-indexed."""
        if self._language(partner_id) == language:
            return 0
        async with self._transaction() as tx:
            await tx.write(
                "INSERT INTO search_languages (partner_id, language) VALUES (?, ?)"
                " ON CONFLICT (partner_id) DO UPDATE SET language = excluded.language",
                partner_id,
                language,
            )
            self._languages[partner_id] = language
            try:
                count = await self._recompute_search_terms(partner_id)
                threads = await self._threads(tx, "partner_id = ?", partner_id)
                await self._rewrite_neighbours(tx, threads)
                return count
            except BaseException:
                await self._load_search_languages()
                raise

    async def _recompute_search_terms(self, partner_id: str | None = None) -> int:
        """Recompute the index terms of stored messages (all, or one partner's) in Python and
        rewrite the rows whose terms changed; the update trigger rewrites the index. Runs
        inside the caller's transaction."""
        where = "terms IS NOT NULL AND id > ?"
        params: list[Any] = []
        if partner_id is not None:
            where += " AND partner_id = ?"
            params.append(partner_id)
        changed, after = 0, 0
        while True:
            rows = await self._sqlite_all(
                f"SELECT id, partner_id, scope, text, terms FROM messages WHERE {where}"
                " ORDER BY id LIMIT ?",
                (after, *params, REINDEX_BATCH),
            )
            if not rows:
                return changed
            updates = self._changed_terms(rows)
            await self._db.executemany("UPDATE messages SET terms = ? WHERE id = ?", updates)
            changed += len(updates)
            after = rows[-1][0]

    async def _rebuild_search_terms(self) -> None:
        """Every message's terms and context columns recomputed (a migration step, run while
        the index and its triggers are dropped)."""
        await self._recompute_search_terms()
        await self._rewrite_neighbours(self._open_transaction())

    async def _threads(self, tx: Transaction, where: str, *args: Any) -> list[tuple[str, str, str]]:
        """The conversation threads (chat, partner, audience) that rows matching ``where``
        belong to: what a deletion of those rows must rewrite with _rewrite_neighbours."""
        rows = await tx.all(
            f"SELECT DISTINCT chat_key, partner_id, audience FROM messages WHERE ({where})"
            f" AND terms IS NOT NULL AND role IN {THREAD_ROLES}",
            *args,
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def _rewrite_neighbours(
        self, tx: Transaction, threads: Sequence[tuple[str, str, str]] | None = None
    ) -> int:
        """Set every message's context columns to the terms of its neighbours as the threads
        stand now (all threads if None), rewriting only rows that differ; the update trigger
        rewrites their index rows. Every deletion of messages calls this for the threads it
        touched, so no neighbour keeps a copy of forgotten words. Runs inside the caller's
        transaction ``tx``; returns the rows rewritten."""
        thread = (
            "AND chat_key = ? AND partner_id = ? AND audience = ?" if threads is not None else ""
        )
        sql = (
            "UPDATE messages SET before_terms = t.before, after_terms = t.after FROM ("
            " SELECT id, LAG(terms) OVER w AS before, LEAD(terms) OVER w AS after FROM messages"
            f" WHERE terms IS NOT NULL AND role IN {THREAD_ROLES} {thread}"
            " WINDOW w AS (PARTITION BY chat_key, partner_id, audience ORDER BY id)"
            ") AS t WHERE messages.id = t.id"
            " AND (messages.before_terms IS NOT t.before OR messages.after_terms IS NOT t.after)"
        )
        if threads is None:
            return await tx.write(sql)
        rewritten = 0
        for key in threads:
            rewritten += await tx.write(sql, *key)
        return rewritten
