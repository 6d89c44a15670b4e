"""The web page's logins: one-time login links and browser sessions, both kept only as hashes of
their secrets.

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.web.WebLogins`."""

from __future__ import annotations

from typing import Any, Protocol


class WebStore(Protocol):
    """Logging the owner in to the web page."""

    async def add_web_login(self, token_hash: str, ttl_seconds: float) -> None: ...

    async def redeem_web_login(
        self, token_hash: str, session_hash: str, csrf_token: str, ttl_seconds: float
    ) -> bool:
        """Use up a live login link and open a session with it: False when the link is
        unknown, expired or used already."""

    async def web_session(self, session_hash: str) -> dict[str, Any] | None: ...

    async def end_web_sessions(self, session_hash: str | None = None) -> int: ...
