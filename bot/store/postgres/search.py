"""History search on PostgreSQL: the same Python-side terms as SQLite (see
:mod:`bot.store.search`), ranked the way SQLite's FTS5 ranks them.

Why a terms array and not a ``tsvector``: the terms are made in Python already (folded,
stemmed, CJK bigrams, tagged with their audience), so the database has nothing left to parse;
a ``tsvector`` would run them through PostgreSQL's word parser again (which splits some of our
terms by the server's locale) and keeps neither a term's count per column nor the lengths BM25
needs. So each row's terms stay the space-separated text SQLite indexes, a GIN index over
their words (:mod:`bot.store.migrations.search_words`) finds the rows sharing a query
term, and the score is FTS5's BM25 written out in SQL: the same weights per column (a
message's own terms 1.0, the scope token 0.0, its neighbours' terms :data:`CONTEXT_WEIGHT`),
the same document length (every term of the row's columns and its scope token), the same
IDF over every indexed message, k1 = 1.2 and b = 0.75, newer first on ties. The totals FTS5
keeps inside its index (rows, terms) are kept in ``search_totals`` by a trigger, one row per
server process so concurrent writers never wait on one counter. bench/recall.py compares the
two backends' top results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.store.base import Transaction as AnyTransaction
from bot.store.migrations.search_words import postgres_search_words
from bot.store.postgres.base import PostgresBase, Transaction
from bot.store.search_rows import SearchHit
from bot.store.search_terms import query_phrases
from bot.store.searchable import (
    CONTEXT_WEIGHT,
    REINDEX_BATCH,
    THREAD_ROLES,
    SearchableMessages,
    audience_token,
    term_tag,
)

BM25_K1 = 1.2
BM25_B = 0.75
"""FTS5's own BM25 constants (sqlite/ext/fts5/fts5_aux.c), so both backends score alike."""
_THREAD_ROLES_SQL = "(" + ", ".join(f"'{role}'" for role in THREAD_ROLES) + ")"


def _hits(column: str, phrase: str = "q.phrase") -> str:
    """Occurrences of a phrase (terms joined by single spaces) in a column of space-separated
    terms: each match starts at a space and ends before one, so matches that touch are all
    counted. (Terms are letters and digits only: nothing in them is special to a regex.)"""
    return f"coalesce(regexp_count(' ' || {column} || ' ', ' ' || {phrase} || '(?= )'), 0)"


def _count(terms: str, column: str) -> str:
    """Occurrences of the phrase ``q`` in one term column of a candidate: a single term is
    counted in the column's array (``terms``), a phrase of several (a CJK run) by the regex
    over its text (``column``), which costs more: only where the column holds all its terms."""
    return (
        f"CASE WHEN q.single THEN coalesce(cardinality(array_positions({terms}, q.phrase)), 0)"
        f" WHEN {terms} @> q.words THEN {_hits(column)} ELSE 0 END"
    )


SEARCH_SQL = f"""
WITH totals AS MATERIALIZED (
    SELECT greatest(sum(documents), 1)::float8 AS documents,
           greatest(sum(tokens), 1)::float8 / greatest(sum(documents), 1) AS average_length
    FROM search_totals
), q AS MATERIALIZED (
    SELECT p.phrase, position(' ' IN p.phrase) = 0 AS single,
        string_to_array(p.phrase, ' ') AS words,
        greatest(ln((t.documents - hits.n + 0.5) / (hits.n + 0.5)), 1e-6) AS idf
    FROM unnest($1::text[]) AS p(phrase) CROSS JOIN totals t
    CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS n FROM messages x
        WHERE x.terms IS NOT NULL
        AND {postgres_search_words("x")} @> string_to_array(p.phrase, ' ')
        AND (position(' ' IN p.phrase) = 0
             OR {_hits("x.terms", "p.phrase")} + {_hits("x.before_terms", "p.phrase")}
                + {_hits("x.after_terms", "p.phrase")} > 0)
    ) AS hits
), candidates AS MATERIALIZED (
    SELECT m.id, m.session_id, m.role, m.text, m.created_at, m.platform_message_id, m.speaker,
        m.terms, m.before_terms, m.after_terms, string_to_array(m.terms, ' ') AS own,
        string_to_array(m.before_terms, ' ') AS before, string_to_array(m.after_terms, ' ')
        AS after
    FROM messages m
    WHERE m.terms IS NOT NULL AND m.scope = ANY($2::text[]) AND m.partner_id = $3
    AND {postgres_search_words("m")} && $4::text[]
    AND m.status != 'pending'
    AND m.created_at >= coalesce($5, m.created_at)
    AND m.created_at < coalesce($6, m.created_at + 1)
    AND lower(m.speaker) = lower(coalesce($7, m.speaker))
), best AS (
    SELECT c.id, c.session_id, c.role, c.text, c.created_at, c.platform_message_id, c.speaker,
        score.score
    FROM candidates c CROSS JOIN totals t
    CROSS JOIN LATERAL (
        SELECT sum(q.idf * f.f * {BM25_K1 + 1} / (f.f + {BM25_K1} * (1 - {BM25_B}
            + {BM25_B} * (coalesce(cardinality(c.own), 0) + coalesce(cardinality(c.before), 0)
            + coalesce(cardinality(c.after), 0) + 1) / t.average_length))) AS score
        FROM q CROSS JOIN LATERAL (
            SELECT {_count("c.own", "c.terms")} + $8::float8 * (
                {_count("c.before", "c.before_terms")} + {_count("c.after", "c.after_terms")}
            ) AS f
        ) AS f
    ) AS score
    ORDER BY score.score DESC, c.created_at DESC LIMIT $9
)
SELECT b.id, coalesce(s.title, ''), b.role, b.text, b.created_at, b.platform_message_id,
    b.score, b.speaker
FROM best b LEFT JOIN sessions s ON s.id = b.session_id
ORDER BY b.score DESC, b.created_at DESC
"""
"""One search, one round trip: the IDF of each query phrase over every indexed message,
the candidate rows the asker may see, their BM25 scores, and the sessions' titles of the
best only. The totals, the phrases' IDFs and the candidates are MATERIALIZED: inlined into
the score's subquery, PostgreSQL would count each phrase's messages again for every
candidate (and misjudges how many candidates there are)."""


class SearchIndex(SearchableMessages, PostgresBase):
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
        """Best matches first (BM25, newer first on ties) among the given audiences; the
        same contract as :meth:`bot.store.search.SearchIndex.search`."""
        scopes = await self.search_scopes(partner_id, audiences)
        tags = [term_tag(scope) for scope in scopes]
        phrases = query_phrases(query, self._language(partner_id), tags)
        if not phrases or not scopes:
            return []
        words = sorted({word for phrase in phrases for word in phrase.split(" ")})
        rows = await self._all(
            SEARCH_SQL,
            phrases, scopes, partner_id, words, since, until, speaker, CONTEXT_WEIGHT, limit,
        )  # fmt: skip
        return [SearchHit(*row) for row in rows]

    async def search_scopes(self, partner_id: str, audiences: Sequence[str] | None) -> list[str]:
        """The scope tokens of the audiences a search may see (None: all of the partner's)."""
        if audiences is None:
            rows = await self._all(
                "SELECT scope FROM search_scopes WHERE partner_id = $1", partner_id
            )
            return [row[0] for row in rows]
        return [audience_token(partner_id, a) for a in audiences]

    async def set_search_language(self, partner_id: str, language: str) -> int:
        """Stem this partner's history in ``language`` from now on; a change re-indexes what
        is stored. Returns messages re-indexed."""
        if self._language(partner_id) == language:
            return 0
        self._languages[partner_id] = language
        try:
            async with self._transaction() as tx:
                await tx.write(
                    "INSERT INTO search_languages (partner_id, language) VALUES ($1, $2)"
                    " ON CONFLICT (partner_id) DO UPDATE SET language = excluded.language",
                    partner_id,
                    language,
                )
                count = await self._recompute_search_terms(tx, partner_id)
                threads = await self._threads(tx, "partner_id = $1", partner_id)
                await self._rewrite_neighbours(tx, threads)
                return count
        except BaseException:
            await self._load_search_languages()
            raise

    async def _recompute_search_terms(self, tx: Transaction, partner_id: str) -> int:
        """Recompute the index terms of one partner's stored messages in Python and rewrite
        the rows whose terms changed, inside the caller's transaction."""
        changed, after = 0, 0
        while True:
            rows = await tx.all(
                "SELECT id, partner_id, scope, text, terms FROM messages WHERE terms IS NOT NULL"
                " AND id > $1 AND partner_id = $2 ORDER BY id LIMIT $3",
                after,
                partner_id,
                REINDEX_BATCH,
            )
            if not rows:
                return changed
            updates = self._changed_terms(rows)
            await tx.write_many("UPDATE messages SET terms = $1 WHERE id = $2", updates)
            changed += len(updates)
            after = rows[-1][0]

    async def _threads(
        self, tx: AnyTransaction, where: str, *args: Any
    ) -> list[tuple[str, str, str]]:
        """The conversation threads (chat, partner, audience) that rows matching ``where``
        belong to: what a deletion of those rows must rewrite with _rewrite_neighbours."""
        rows = await tx.all(
            f"SELECT DISTINCT chat_key, partner_id, audience FROM messages WHERE ({where})"
            f" AND terms IS NOT NULL AND role IN {_THREAD_ROLES_SQL}",
            *args,
        )
        return [(row[0], row[1], row[2]) for row in rows]

    async def _rewrite_neighbours(
        self, tx: AnyTransaction, threads: Sequence[tuple[str, str, str]]
    ) -> int:
        """Set the context columns of every message of these threads to the terms of its
        neighbours as the threads stand now, rewriting only rows that differ. Every deletion
        of messages calls this for the threads it touched, so no neighbour keeps a copy of
        forgotten words. Runs inside the caller's transaction; returns the rows rewritten."""
        rewritten = 0
        for key in threads:
            rewritten += await tx.write(
                "UPDATE messages SET before_terms = t.before, after_terms = t.after FROM ("
                " SELECT id, lag(terms) OVER w AS before, lead(terms) OVER w AS after"
                " FROM messages WHERE terms IS NOT NULL"
                f" AND role IN {_THREAD_ROLES_SQL} AND chat_key = $1 AND partner_id = $2"
                " AND audience = $3"
                " WINDOW w AS (PARTITION BY chat_key, partner_id, audience ORDER BY id)"
                ") AS t WHERE messages.id = t.id"
                " AND (messages.before_terms IS DISTINCT FROM t.before"
                " OR messages.after_terms IS DISTINCT FROM t.after)",
                *key,
            )
        return rewritten
