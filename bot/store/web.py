"""The owner's web page's logins: one-time login links and browser sessions, both kept only as
hashes of their secrets, so a copy of the database logs nobody in (docs/web.md). One query
text for both backends."""

from __future__ import annotations

import time
from typing import Any

from bot.store.base import StoreBase


class WebLogins(StoreBase):
    """One-time login links from ``/admin web`` and the sessions they open."""

    async def add_web_login(self, token_hash: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO web_logins (token_hash, created_at, expires_at) VALUES (?1, ?2, ?3)",
            token_hash,
            now,
            now + ttl_seconds,
        )

    async def redeem_web_login(
        self, token_hash: str, session_hash: str, csrf_token: str, ttl_seconds: float
    ) -> bool:
        """Use up a live login link and open a session with it, in one transaction: False
        when the link is unknown, expired or used already (two workers redeeming one link
        at once: the row lock lets one of them)."""
        now = time.time()
        async with self._transaction() as tx:
            used = await tx.write(
                "UPDATE web_logins SET used_at = ?1 WHERE token_hash = ?2 AND used_at IS NULL"
                " AND expires_at > ?1",
                now,
                token_hash,
            )
            if used != 1:
                return False
            await tx.write(
                "INSERT INTO web_sessions (session_hash, csrf_token, created_at, expires_at)"
                " VALUES (?1, ?2, ?3, ?4)",
                session_hash,
                csrf_token,
                now,
                now + ttl_seconds,
            )
            await tx.write("DELETE FROM web_logins WHERE expires_at < ?1", now)
            await tx.write("DELETE FROM web_sessions WHERE expires_at < ?1", now)
        return True

    async def web_session(self, session_hash: str) -> dict[str, Any] | None:
        """A live session (with its CSRF token), or None."""
        row = await self._one(
            "SELECT * FROM web_sessions WHERE session_hash = ?1 AND expires_at > ?2",
            session_hash,
            time.time(),
        )
        return dict(row) if row else None

    async def end_web_sessions(self, session_hash: str | None = None) -> int:
        """End one session, or (None) every session and every unused link."""
        if session_hash is not None:
            return await self._write(
                "DELETE FROM web_sessions WHERE session_hash = ?1", session_hash
            )
        async with self._transaction() as tx:
            ended = await tx.write("DELETE FROM web_sessions")
            await tx.write("DELETE FROM web_logins WHERE used_at IS NULL")
        return ended
