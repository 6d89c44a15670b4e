"""The owner's web page's logins: one-time login links and browser sessions, both kept only as
hashes of their secrets, so a copy of the database logs nobody in (docs/web.md)."""

from __future__ import annotations

import time
from typing import Any

from bot.store.connection import SqliteBase


class WebLogins(SqliteBase):
    """One-time login links from ``/admin web`` and the sessions they open."""

    async def add_web_login(self, token_hash: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO web_logins (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
            (token_hash, now, now + ttl_seconds),
        )

    async def redeem_web_login(
        self, token_hash: str, session_hash: str, csrf_token: str, ttl_seconds: float
    ) -> bool:
        """Use up a live login link and open a session with it, in one transaction: False
        when the link is unknown, expired or used already."""
        now = time.time()
        async with self._transaction():
            cursor = await self._db.execute(
                "UPDATE web_logins SET used_at = ? WHERE token_hash = ? AND used_at IS NULL"
                " AND expires_at > ?",
                (now, token_hash, now),
            )
            if cursor.rowcount != 1:
                return False
            await self._db.execute(
                "INSERT INTO web_sessions (session_hash, csrf_token, created_at, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (session_hash, csrf_token, now, now + ttl_seconds),
            )
            await self._db.execute("DELETE FROM web_logins WHERE expires_at < ?", (now,))
            await self._db.execute("DELETE FROM web_sessions WHERE expires_at < ?", (now,))
        return True

    async def web_session(self, session_hash: str) -> dict[str, Any] | None:
        """A live session (with its CSRF token), or None."""
        row = await self._one(
            "SELECT * FROM web_sessions WHERE session_hash = ? AND expires_at > ?",
            (session_hash, time.time()),
        )
        return dict(row) if row else None

    async def end_web_sessions(self, session_hash: str | None = None) -> int:
        """End one session, or (None) every session and every unused link."""
        if session_hash is not None:
            cursor = await self._write(
                "DELETE FROM web_sessions WHERE session_hash = ?", (session_hash,)
            )
            return cursor.rowcount
        async with self._transaction():
            cursor = await self._db.execute("DELETE FROM web_sessions")
            await self._db.execute("DELETE FROM web_logins WHERE used_at IS NULL")
        return cursor.rowcount
