"""Semantic recall's storage: one vector per searchable message (float32 bytes, with the model
that made it), the background embedder's progress, and the vectors a search may compare —
chosen by the same visibility rule as the lexical search, in SQL, before any score."""

from __future__ import annotations

from collections.abc import Sequence

from bot.store.rows import EmbeddingWork, NewVector, SearchHit
from bot.store.search import SearchIndex


class Vectors(SearchIndex):
    """Vectors for semantic recall (README "Recall")."""

    async def embedding_work(self, model: str, limit: int) -> EmbeddingWork:
        """What the background embedder does next for ``model``: searchable messages it has
        not read yet (after its watermark) and, first, those whose text changed since."""
        upto = await self.embedding_watermark(model)
        redo = await self._all(
            "SELECT m.id, m.text FROM embedding_redo r JOIN messages m ON m.id = r.message_id"
            " WHERE r.message_id <= ? AND m.terms IS NOT NULL ORDER BY r.message_id LIMIT ?",
            (upto, limit),
        )
        fresh = await self._all(
            "SELECT id, text FROM messages WHERE id > ? AND terms IS NOT NULL ORDER BY id LIMIT ?",
            (upto, max(limit - len(redo), 0)),
        )
        return EmbeddingWork(
            texts=tuple((row[0], row[1]) for row in (*redo, *fresh)),
            upto=fresh[-1][0] if fresh else upto,
        )

    async def embedding_watermark(self, model: str) -> int:
        """How far the background embedder has read ``model``'s messages (a message id)."""
        row = await self._one("SELECT upto FROM embedding_progress WHERE model = ?", (model,))
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
        return kept

    async def skip_embedding(self, message_ids: Sequence[int]) -> None:
        """Messages the endpoint refused to embed (or with nothing to embed) are not retried."""
        await self._write_many(
            "DELETE FROM embedding_redo WHERE message_id = ?", [(i,) for i in message_ids]
        )

    async def embedding_backlog(self, model: str) -> int:
        """Searchable messages still waiting for a vector of ``model``."""
        upto = await self.embedding_watermark(model)
        row = await self._one(
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
        rows = await self._all(
            "SELECT m.id, m.text FROM messages m"
            " LEFT JOIN message_vectors v ON v.message_id = m.id AND v.model = ?"
            f" WHERE m.id > ? AND m.terms IS NOT NULL {partner} AND v.message_id IS NULL"
            " ORDER BY m.id LIMIT ?",
            (model, after_id, *([partner_id] if partner_id is not None else []), limit),
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
        """The vectors a search may compare: the same visibility rule as :meth:`search`
        (this partner, the audiences the asker may see, finished messages, the same date and
        speaker filters), applied here in SQL before any score is computed, and only vectors
        of ``model`` with ``dim`` dimensions. At most ``limit``, the newest first."""
        scopes = await self._search_scopes(partner_id, audiences)
        if not scopes:
            return []
        marks = ", ".join("?" for _ in scopes)
        rows = await self._all(
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
        rows = await self._all(
            "SELECT m.id, COALESCE(s.title, ''), m.role, m.text, m.created_at,"
            " m.platform_message_id FROM messages m LEFT JOIN sessions s ON s.id = m.session_id"
            f" WHERE m.id IN ({marks})",
            tuple(message_ids),
        )
        return {row[0]: SearchHit(*row) for row in rows}
