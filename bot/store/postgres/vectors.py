"""Semantic recall's storage on PostgreSQL (see :mod:`bot.store.vectors`, whose SQLite twin
this is): one vector per searchable message as BYTEA (the same float32 bytes), the background
embedder's progress, and the vectors a search may compare, chosen by the same visibility rule
as the lexical search, in SQL, before any score.

The embedder's watermark cannot simply follow the ids it read, as on SQLite: ids come from a
sequence and are taken when a row is inserted, but rows become visible when their transaction
commits, so a turn's reply (id 500, written by another worker) may commit after message 501
was read, and a watermark moved to 501 would pass 500 for good. So the watermark waits:
each pass notes the highest id visible and when (the database's clock), and the watermark
moves up to that id only once no transaction that had begun by then is still running
(``pg_stat_activity``). Any lower id still invisible then belonged to such a transaction
(its id was taken before the noted one, so its transaction began before that one committed),
which has ended by now: committed and visible, or rolled back. Until then the embedder works
the messages past the watermark that have no vector of its model yet (an anti-join on
``message_vectors``, over the few rows written since the last pass), and skipped texts (blank
or refused by the endpoint) are listed in ``embedding_skipped`` so they are not sent again
meanwhile. When the watermark moves it stops below the first of those ids still waiting.

A transaction left open for long (an operator's ``BEGIN`` in psql) only holds the watermark
back: the messages past it are still embedded, once each. The workers' role must see its own
sessions in ``pg_stat_activity`` (every role sees its own; a superuser or
``pg_read_all_stats`` sees all), which is the case when every worker connects as one role.

The vector log (``vector_log.seq``) has no such gap: every writer to it takes one advisory lock
until it commits (schema step 16), so its numbers become visible in order, whichever worker
writes a vector."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.postgres.base import Transaction
from bot.store.postgres.search import SearchIndex
from bot.store.search_rows import EmbeddingWork, NewVector, SearchHit, StoredVector, VectorChanges
from bot.store.vectors import VECTOR_LOG_KEEP

SAVE_VECTOR = (
    "WITH kept AS (INSERT INTO message_vectors (message_id, model, dim, scope, vector)"
    " SELECT id, $1, $2, scope, $3 FROM messages"
    " WHERE id = $4 AND text = $5 AND scope IS NOT NULL"
    " ON CONFLICT (message_id) DO UPDATE SET model = excluded.model, dim = excluded.dim,"
    " scope = excluded.scope, vector = excluded.vector RETURNING message_id),"
    " done AS (DELETE FROM embedding_redo WHERE message_id IN (SELECT message_id FROM kept))"
    " SELECT count(*) FROM kept"
)
"""A vector is kept only if its message still holds the text it was made from."""
WAITING = (
    "m.terms IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = $1)"
    " AND NOT EXISTS (SELECT 1 FROM embedding_skipped s WHERE s.message_id = m.id)"
)
"""A message ``m`` that waits for a vector of the model ``$1`` (past the watermark)."""
SETTLED = (
    "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
    " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    " AND xact_start < to_timestamp($1) + interval '1 millisecond')"
)
"""Whether every transaction that had begun at ``$1`` (seconds, the database's clock) has
ended; the millisecond covers the rounding of a timestamp kept as a float."""


class Vectors(SearchIndex):
    """Vectors for semantic recall (docs/search.md)."""

    async def embedding_work(self, model: str, limit: int) -> EmbeddingWork:
        """What the background embedder does next for ``model``: messages whose text changed
        after it read them first, then those past its watermark without a vector of ``model``
        (see the module's docstring for why the watermark waits)."""
        upto = await self._moved_watermark(model)
        redo = await self._all(
            "SELECT m.id, m.text FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= $1 AND m.terms IS NOT NULL ORDER BY r.message_id LIMIT $2",
            upto,
            limit,
        )
        fresh = await self._all(
            f"SELECT m.id, m.text FROM messages m WHERE m.id > $2 AND {WAITING}"
            " ORDER BY m.id LIMIT $3",
            model,
            upto,
            max(limit - len(redo), 0),
        )
        return EmbeddingWork(texts=tuple((row[0], row[1]) for row in (*redo, *fresh)), upto=upto)

    async def _moved_watermark(self, model: str) -> int:
        """Move ``model``'s watermark as far as is safe and note the highest id visible now
        (kept until the watermark may reach it); returns the watermark."""
        async with self._transaction() as tx:
            row = await tx.one(
                "SELECT upto, seen_upto, seen_at FROM embedding_progress WHERE model = $1"
                " FOR UPDATE",
                model,
            )
            upto, seen_upto, seen_at = (row[0], row[1], row[2]) if row else (0, None, None)
            if seen_upto is not None:
                settled = await tx.one(SETTLED, seen_at)
                if not (settled and settled[0]):
                    return int(upto)
                upto = await _settled_upto(tx, model, upto, seen_upto)
            await tx.write(
                "INSERT INTO embedding_progress AS p (model, upto, seen_upto, seen_at)"
                " SELECT $1, $2, coalesce(max(id), 0), extract(epoch FROM clock_timestamp())"
                " FROM messages ON CONFLICT (model) DO UPDATE SET"
                " upto = greatest(p.upto, excluded.upto), seen_upto = excluded.seen_upto,"
                " seen_at = excluded.seen_at",
                model,
                upto,
            )
            await tx.write("DELETE FROM embedding_skipped WHERE message_id <= $1", upto)
        return int(upto)

    async def embedding_watermark(self, model: str) -> int:
        """How far the background embedder has read ``model``'s messages (a message id)."""
        row = await self._one("SELECT upto FROM embedding_progress WHERE model = $1", model)
        return int(row[0]) if row else 0

    async def save_vectors(
        self, model: str, vectors: Sequence[NewVector], upto: int | None = None
    ) -> int:
        """Store vectors of ``model`` (replacing another model's) and move the watermark to
        ``upto``; see the SQLite store. Returns how many were kept."""
        kept = 0
        async with self._transaction() as tx:
            for new in vectors:
                row = await tx.one(
                    SAVE_VECTOR, model, new.dim, new.vector, new.message_id, new.text
                )
                kept += int(row[0]) if row else 0
            if upto is not None:
                await tx.write(
                    "INSERT INTO embedding_progress AS p (model, upto) VALUES ($1, $2)"
                    " ON CONFLICT (model) DO UPDATE SET upto = greatest(p.upto, excluded.upto)",
                    model,
                    upto,
                )
            await tx.write(
                "DELETE FROM vector_log WHERE seq <= (SELECT max(seq) FROM vector_log) - $1",
                VECTOR_LOG_KEEP,
            )
        return kept

    async def skip_embedding(self, message_ids: Sequence[int]) -> None:
        """Messages the endpoint refused to embed (or with nothing to embed) are not retried:
        neither as changed text nor, while the watermark waits below them, as new messages."""
        if message_ids:
            async with self._transaction() as tx:
                await tx.write(
                    "DELETE FROM embedding_redo WHERE message_id = ANY($1::bigint[])",
                    list(message_ids),
                )
                await tx.write(
                    "INSERT INTO embedding_skipped (message_id)"
                    " SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING",
                    list(message_ids),
                )

    async def embedding_backlog(self, model: str) -> int:
        """Searchable messages still waiting for a vector of ``model``: past the watermark
        without one, and changed since they were read."""
        upto = await self.embedding_watermark(model)
        row = await self._one(
            f"SELECT (SELECT count(*) FROM messages m WHERE m.id > $2 AND {WAITING})"
            " + (SELECT count(*) FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= $2 AND m.terms IS NOT NULL)",
            model,
            upto,
        )
        return int(row[0]) if row else 0

    async def unembedded(
        self, model: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[tuple[int, str]]:
        """Searchable messages (all, or one partner's) with no vector of ``model``, by id
        after ``after_id``: what ``companion reindex`` embeds."""
        rows = await self._all(
            "SELECT m.id, m.text FROM messages m"
            " LEFT JOIN message_vectors v ON v.message_id = m.id AND v.model = $1"
            " WHERE m.id > $2 AND m.terms IS NOT NULL"
            " AND m.partner_id = coalesce($3, m.partner_id) AND v.message_id IS NULL"
            " ORDER BY m.id LIMIT $4",
            model,
            after_id,
            partner_id,
            limit,
        )
        return [(row[0], row[1]) for row in rows]

    async def unembedded_count(self, model: str, partner_id: str | None) -> int:
        """How many messages :meth:`unembedded` lists from the start (a reindex's total)."""
        row = await self._one(
            "SELECT count(*) FROM messages m WHERE m.terms IS NOT NULL"
            " AND m.partner_id = coalesce($2, m.partner_id) AND NOT EXISTS"
            " (SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = $1)",
            model,
            partner_id,
        )
        return int(row[0]) if row else 0

    async def vector_candidates(
        self,
        partner_id: str,
        audiences: Sequence[str] | None,
        model: str,
        dim: int,
        limit: int,
        *,
        since: float | None = None,
        until: float | None = None,
        speaker: str | None = None,
    ) -> list[tuple[int, bytes]]:
        """The vectors a search may compare: the same visibility rule as :meth:`search`,
        applied in SQL before any score is computed; see the SQLite store."""
        scopes = await self.search_scopes(partner_id, audiences)
        if not scopes:
            return []
        rows = await self._all(
            "SELECT v.message_id, v.vector FROM message_vectors v"
            " JOIN messages m ON m.id = v.message_id"
            " WHERE v.scope = ANY($1::text[]) AND v.model = $2 AND v.dim = $3"
            " AND m.partner_id = $4 AND m.scope = ANY($1::text[]) AND m.terms IS NOT NULL"
            " AND m.status != 'pending'"
            " AND m.created_at >= coalesce($5, m.created_at)"
            " AND m.created_at < coalesce($6, m.created_at + 1)"
            " AND lower(m.speaker) = lower(coalesce($7, m.speaker))"
            " ORDER BY v.message_id DESC LIMIT $8",
            scopes, model, dim, partner_id, since, until, speaker, limit,
        )  # fmt: skip
        return [(row[0], bytes(row[1])) for row in rows]

    async def search_hits(self, message_ids: Sequence[int]) -> dict[int, SearchHit]:
        """Search results for messages a vector search found (already filtered by it)."""
        if not message_ids:
            return {}
        rows = await self._all(
            "SELECT m.id, coalesce(s.title, ''), m.role, m.text, m.created_at,"
            " m.platform_message_id FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
            " WHERE m.id = ANY($1::bigint[])",
            list(message_ids),
        )
        return {row[0]: SearchHit(*row) for row in rows}

    async def vector_log_position(self) -> int:
        """Where the vector log stands now: read it before reading the vectors it covers."""
        row = await self._one("SELECT max(seq) FROM vector_log")
        return int(row[0]) if row and row[0] is not None else 0

    async def vector_changes(self, after_seq: int) -> VectorChanges:
        """Messages whose vector changed, or which entered or left 'pending', after
        ``after_seq``; ``message_ids`` is None when entries after ``after_seq`` were pruned.
        One statement, so the oldest entry and the new ones are read in one snapshot. A
        writer to the log holds a lock until it commits (schema step 16), so the log's
        numbers are in commit order and none lower than one read here commits later."""
        rows = await self._all(
            "SELECT (SELECT min(seq) FROM vector_log) AS first, seq, message_id"
            " FROM vector_log WHERE seq > $1 ORDER BY seq",
            after_seq,
        )
        if not rows:
            return VectorChanges(after_seq, ())
        if rows[0]["first"] > after_seq + 1:  # pruning removes the oldest entries
            return VectorChanges(rows[-1]["seq"], None)
        return VectorChanges(
            rows[-1]["seq"], tuple(dict.fromkeys(row["message_id"] for row in rows))
        )

    async def stored_vectors(
        self,
        partner_id: str,
        model: str,
        dim: int,
        *,
        after_id: int = 0,
        limit: int | None = None,
        message_ids: Sequence[int] | None = None,
    ) -> list[StoredVector]:
        """The vectors the in-memory cache keeps for one partner, model and dimension (see
        the SQLite store), by id after ``after_id``, or only ``message_ids``."""
        rows = await self._all(
            "SELECT v.message_id, v.scope, m.created_at, m.speaker, v.vector"
            " FROM message_vectors v JOIN messages m ON m.id = v.message_id"
            " WHERE m.partner_id = $1 AND v.model = $2 AND v.dim = $3 AND v.message_id > $4"
            " AND m.scope = v.scope AND m.terms IS NOT NULL AND m.status != 'pending'"
            " AND ($5::bigint[] IS NULL OR v.message_id = ANY($5::bigint[]))"
            " ORDER BY v.message_id LIMIT $6",
            partner_id,
            model,
            dim,
            after_id,
            list(message_ids) if message_ids is not None else None,
            limit,
        )
        return [StoredVector(row[0], row[1], row[2], row[3], bytes(row[4])) for row in rows]


async def _settled_upto(tx: Transaction, model: str, upto: int, seen_upto: int) -> int:
    """Where the watermark may go once every id up to ``seen_upto`` is visible (or rolled
    back): there, or just below the first message past ``upto`` still waiting for a vector."""
    row = await tx.one(
        f"SELECT min(m.id) FROM messages m WHERE m.id > $2 AND m.id <= $3 AND {WAITING}",
        model,
        upto,
        seen_upto,
    )
    waiting = row[0] if row else None
    return max(upto, seen_upto if waiting is None else waiting - 1)
