"""Semantic recall's storage: one vector per searchable message (float32 bytes, with the model
that made it), the background embedder's progress, and the vectors a search may compare —
chosen by the same visibility rule as the lexical search, in SQL, before any score."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from bot.store.search import SearchIndex
from bot.store.search_rows import EmbeddingWork, NewVector, SearchHit, StoredVector, VectorChanges

VECTOR_LOG_KEEP = 100_000
"""Vector log entries kept: a cache further behind than this reads its vectors again."""
NO_VECTOR = (
    "m.terms IS NOT NULL AND NOT EXISTS"
    " (SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = ?)"
)
"""A searchable message ``m`` with no vector of the model (the parameter) yet: past the
watermark, one that ``companion reindex`` embedded already is not embedded again."""


class Vectors(SearchIndex):
    """Vectors for semantic recall (docs/search.md)."""

    async def embedding_work(self, model: str, limit: int) -> EmbeddingWork:
        """What the background embedder does next for ``model``: searchable messages it has
        not read yet (after its watermark) and, first, those whose text changed since. The
        watermark may move to the last id read: SQLite commits one writer at a time, so ids
        become visible in order (PostgreSQL's store cannot assume that)."""
        upto = await self.embedding_watermark(model)
        redo = await self._sqlite_all(
            "SELECT m.id, m.text FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= ? AND m.terms IS NOT NULL ORDER BY r.message_id LIMIT ?",
            (upto, limit),
        )
        fresh = await self._sqlite_all(
            f"SELECT m.id, m.text FROM messages m WHERE m.id > ? AND {NO_VECTOR}"
            " ORDER BY m.id LIMIT ?",
            (upto, model, max(limit - len(redo), 0)),
        )
        if not fresh and len(redo) < limit:
            upto = await self._past_embedded(model, upto)
        return EmbeddingWork(
            texts=tuple((row[0], row[1]) for row in (*redo, *fresh)),
            upto=fresh[-1][0] if fresh else upto,
        )

    async def _past_embedded(self, model: str, upto: int) -> int:
        """Move the watermark past messages that already have a vector of ``model`` (those
        ``companion reindex`` embedded), up to the first that has none, in one statement (so
        no message stored meanwhile is passed); returns the watermark."""
        await self._sqlite_write(
            "WITH gap AS (SELECT MIN(n.id) AS first FROM messages n"
            " WHERE n.id > ?2 AND n.terms IS NOT NULL AND NOT EXISTS (SELECT 1"
            " FROM message_vectors v WHERE v.message_id = n.id AND v.model = ?1))"
            " INSERT INTO embedding_progress (model, upto)"
            " SELECT ?1, MAX(m.id) FROM messages m, gap WHERE m.id > ?2 AND m.terms IS NOT NULL"
            " AND m.id < COALESCE(gap.first, m.id + 1) HAVING MAX(m.id) IS NOT NULL"
            " ON CONFLICT (model) DO UPDATE SET upto = MAX(upto, excluded.upto)",
            (model, upto),
        )
        return await self.embedding_watermark(model)

    async def embedding_watermark(self, model: str) -> int:
        """How far the background embedder has read ``model``'s messages (a message id)."""
        row = await self._sqlite_one(
            "SELECT upto FROM embedding_progress WHERE model = ?", (model,)
        )
        return int(row[0]) if row else 0

    async def save_vectors(
        self, model: str, vectors: Sequence[NewVector], upto: int | None = None
    ) -> int:
        """Store vectors of ``model`` (replacing another model's) and move the watermark to
        ``upto``. A vector is kept only if its message still holds the text it was made from:
        a message forgotten or rewritten while its text was at the endpoint gets none.
        Returns how many were kept."""
        kept = 0
        async with self._transaction():
            for new in vectors:
                cursor = await self._db.execute(
                    "INSERT INTO message_vectors (message_id, model, dim, scope, vector)"
                    " SELECT id, ?, ?, scope, ? FROM messages"
                    " WHERE id = ? AND text = ? AND scope IS NOT NULL"
                    " ON CONFLICT (message_id) DO UPDATE SET model = excluded.model,"
                    " dim = excluded.dim, scope = excluded.scope, vector = excluded.vector",
                    (model, new.dim, new.vector, new.message_id, new.text),
                )
                if cursor.rowcount > 0:
                    kept += 1
                    await self._db.execute(
                        "DELETE FROM embedding_redo WHERE message_id = ?", (new.message_id,)
                    )
            if upto is not None:
                await self._db.execute(
                    "INSERT INTO embedding_progress (model, upto) VALUES (?, ?)"
                    " ON CONFLICT (model) DO UPDATE SET upto = MAX(upto, excluded.upto)",
                    (model, upto),
                )
            await self._db.execute(
                "DELETE FROM vector_log WHERE seq <= (SELECT MAX(seq) FROM vector_log) - ?",
                (VECTOR_LOG_KEEP,),
            )
        return kept

    async def skip_embedding(self, message_ids: Sequence[int]) -> None:
        """Messages the endpoint refused to embed (or with nothing to embed) are not retried."""
        await self._sqlite_write_many(
            "DELETE FROM embedding_redo WHERE message_id = ?", [(i,) for i in message_ids]
        )

    async def embedding_backlog(self, model: str) -> int:
        """Searchable messages still waiting for a vector of ``model``: past the watermark
        (those a reindex embedded count until the embedder's next pass moves past them; the
        count never looks at vectors, which it could see before their transaction commits)."""
        upto = await self.embedding_watermark(model)
        row = await self._sqlite_one(
            "SELECT (SELECT COUNT(*) FROM messages WHERE id > ? AND terms IS NOT NULL)"
            " + (SELECT COUNT(*) FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= ? AND m.terms IS NOT NULL)",
            (upto, upto),
        )
        return int(row[0]) if row else 0

    async def unembedded(
        self, model: str, partner_id: str | None, after_id: int, limit: int
    ) -> list[tuple[int, str]]:
        """Searchable messages (all, or one partner's) with no vector of ``model``, by id
        after ``after_id``: what ``companion reindex`` embeds."""
        partner = "AND m.partner_id = ?" if partner_id is not None else ""
        rows = await self._sqlite_all(
            "SELECT m.id, m.text FROM messages m"
            " LEFT JOIN message_vectors v ON v.message_id = m.id AND v.model = ?"
            f" WHERE m.id > ? AND m.terms IS NOT NULL {partner} AND v.message_id IS NULL"
            " ORDER BY m.id LIMIT ?",
            (model, after_id, *([partner_id] if partner_id is not None else []), limit),
        )
        return [(row[0], row[1]) for row in rows]

    async def unembedded_count(self, model: str, partner_id: str | None) -> int:
        """How many messages :meth:`unembedded` lists from the start (a reindex's total)."""
        row = await self._sqlite_one(
            f"SELECT COUNT(*) FROM messages m WHERE {NO_VECTOR}"
            " AND m.partner_id = COALESCE(?, m.partner_id)",
            (model, partner_id),
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
        """The vectors a search may compare: the same visibility rule as :meth:`search`
        (this partner, the audiences the asker may see, finished messages, the same date and
        speaker filters), applied here in SQL before any score is computed, and only vectors
        of ``model`` with ``dim`` dimensions. At most ``limit``, the newest first."""
        scopes = await self.search_scopes(partner_id, audiences)
        if not scopes:
            return []
        marks = ", ".join("?" for _ in scopes)
        rows = await self._sqlite_all(
            "SELECT v.message_id, v.vector FROM message_vectors v"
            " JOIN messages m ON m.id = v.message_id"
            f" WHERE v.scope IN ({marks}) AND v.model = ? AND v.dim = ?"
            f" AND m.partner_id = ? AND m.scope IN ({marks}) AND m.terms IS NOT NULL"
            " AND m.status != 'pending'"
            " AND m.created_at >= COALESCE(?, m.created_at)"
            " AND m.created_at < COALESCE(?, m.created_at + 1)"
            " AND m.speaker = COALESCE(?, m.speaker) COLLATE NOCASE"
            " ORDER BY v.message_id DESC LIMIT ?",
            (*scopes, model, dim, partner_id, *scopes, since, until, speaker, limit),
        )
        return [(row[0], row[1]) for row in rows]

    async def search_hits(self, message_ids: Sequence[int]) -> dict[int, SearchHit]:
        """Search results for messages a vector search found (already filtered by it)."""
        if not message_ids:
            return {}
        marks = ", ".join("?" for _ in message_ids)
        rows = await self._sqlite_all(
            "SELECT m.id, COALESCE(s.title, ''), m.role, m.text, m.created_at,"
            " m.platform_message_id FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
            f" WHERE m.id IN ({marks})",
            tuple(message_ids),
        )
        return {row[0]: SearchHit(*row) for row in rows}

    async def vector_log_position(self) -> int:
        """Where the vector log stands now: read it before reading the vectors it covers, so
        a change made in between is seen again, never missed."""
        row = await self._sqlite_one("SELECT MAX(seq) FROM vector_log")
        return int(row[0]) if row and row[0] is not None else 0

    async def vector_changes(self, after_seq: int) -> VectorChanges:
        """Messages whose vector was stored, replaced or deleted, or which entered or left
        'pending', after ``after_seq`` (the schema's triggers log every such change).
        ``message_ids`` is None when entries after ``after_seq`` were pruned."""

        def read(db: sqlite3.Connection) -> VectorChanges:
            first = db.execute("SELECT MIN(seq) FROM vector_log").fetchone()[0]
            rows = db.execute(
                "SELECT seq, message_id FROM vector_log WHERE seq > ? ORDER BY seq", (after_seq,)
            ).fetchall()
            if not rows:
                return VectorChanges(after_seq, ())
            if first > after_seq + 1:  # pruning removes the oldest entries: some are gone
                return VectorChanges(rows[-1][0], None)
            return VectorChanges(rows[-1][0], tuple(dict.fromkeys(row[1] for row in rows)))

        return await self._db.run(read)

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
        """The vectors the in-memory cache keeps for one partner, model and dimension: those
        of searchable, finished messages (what :meth:`vector_candidates` may return before
        the asker's scopes and filters), by id after ``after_id``, or only ``message_ids``."""
        where = ""
        params: list[object] = [partner_id, model, dim, after_id]
        if message_ids is not None:
            where = f" AND v.message_id IN ({', '.join('?' for _ in message_ids)})"
            params.extend(message_ids)
        params.append(-1 if limit is None else limit)
        rows = await self._sqlite_all(
            "SELECT v.message_id, v.scope, m.created_at, m.speaker, v.vector"
            " FROM message_vectors v JOIN messages m ON m.id = v.message_id"
            " WHERE m.partner_id = ? AND v.model = ? AND v.dim = ? AND v.message_id > ?"
            " AND m.scope = v.scope AND m.terms IS NOT NULL AND m.status != 'pending'"
            f"{where} ORDER BY v.message_id LIMIT ?",
            tuple(params),
        )
        return [StoredVector(*row) for row in rows]
