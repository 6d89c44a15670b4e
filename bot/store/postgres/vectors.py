"""Semantic recall's storage on PostgreSQL (see :mod:`bot.store.vectors`, whose SQLite twin
this is): one vector per searchable message as BYTEA (the same float32 bytes), the background
embedder's progress, and the vectors a search may compare, chosen by the same visibility rule
as the lexical search, in SQL, before any score."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.postgres.search import SearchIndex
from bot.store.rows import EmbeddingWork, NewVector, SearchHit, StoredVector, VectorChanges
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


class Vectors(SearchIndex):
    """Vectors for semantic recall (README "Recall")."""

    async def embedding_work(self, model: str, limit: int) -> EmbeddingWork:
        """What the background embedder does next for ``model``: searchable messages it has
        not read yet (after its watermark) and, first, those whose text changed since."""
        upto = await self.embedding_watermark(model)
        redo = await self._all(
            "SELECT m.id, m.text FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= $1 AND m.terms IS NOT NULL ORDER BY r.message_id LIMIT $2",
            upto,
            limit,
        )
        fresh = await self._all(
            "SELECT id, text FROM messages WHERE id > $1 AND terms IS NOT NULL"
            " ORDER BY id LIMIT $2",
            upto,
            max(limit - len(redo), 0),
        )
        return EmbeddingWork(
            texts=tuple((row[0], row[1]) for row in (*redo, *fresh)),
            upto=fresh[-1][0] if fresh else upto,
        )

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
        """Messages the endpoint refused to embed (or with nothing to embed) are not retried."""
        if message_ids:
            await self._write(
                "DELETE FROM embedding_redo WHERE message_id = ANY($1::bigint[])",
                list(message_ids),
            )

    async def embedding_backlog(self, model: str) -> int:
        """Searchable messages still waiting for a vector of ``model``."""
        upto = await self.embedding_watermark(model)
        row = await self._one(
            "SELECT (SELECT count(*) FROM messages WHERE id > $1 AND terms IS NOT NULL)"
            " + (SELECT count(*) FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= $1 AND m.terms IS NOT NULL)",
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
