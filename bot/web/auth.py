"""Who may use the web page: one-time login links and the browser sessions they open.

A link carries a random token that works once, for :data:`LOGIN_TTL_SECONDS`; opening it shows
a button, and only pressing it (a POST) uses the token up, so a chat app that fetches the link
for a preview cannot spend it. The session cookie is random too, ``HttpOnly`` and
``SameSite=Strict`` (``Secure`` behind https). The store keeps only SHA-256 hashes of tokens
and session ids: a copy of the database logs nobody in. Each session has its own CSRF token,
which every state-changing request must carry.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from bot.config.deployment import WebConfig
from bot.store import Store

LOGIN_TTL_SECONDS = 600.0
SECRET_BYTES = 32
COOKIE_NAME = "companion_session"
HOUR_SECONDS = 3600.0


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class WebSession:
    """A logged-in browser: its hashed id (the store's key) and its CSRF token."""

    session_hash: str
    csrf_token: str

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given, self.csrf_token)


@dataclass(frozen=True)
class NewSession:
    """A session just opened: the cookie value goes to the browser, never to the store."""

    cookie: str
    session: WebSession


class WebAuth:
    def __init__(self, store: Store, config: WebConfig) -> None:
        self.store = store
        self.config = config

    @property
    def secure_cookie(self) -> bool:
        return bool(self.config.public_url and self.config.public_url.startswith("https://"))

    @property
    def session_seconds(self) -> float:
        return self.config.session_hours * HOUR_SECONDS

    async def new_login_token(self) -> str:
        # hex: nothing in it that chat Markdown could read as emphasis
        token = secrets.token_hex(SECRET_BYTES)
        await self.store.add_web_login(secret_hash(token), LOGIN_TTL_SECONDS)
        return token

    async def redeem(self, token: str) -> NewSession | None:
        """Spend a login token on a new session; None if it is unknown, expired or used."""
        cookie = secrets.token_urlsafe(SECRET_BYTES)
        session = WebSession(secret_hash(cookie), secrets.token_urlsafe(SECRET_BYTES))
        opened = await self.store.redeem_web_login(
            secret_hash(token), session.session_hash, session.csrf_token, self.session_seconds
        )
        return NewSession(cookie, session) if opened else None

    async def session(self, cookie: str | None) -> WebSession | None:
        if not cookie:
            return None
        row = await self.store.web_session(secret_hash(cookie))
        return WebSession(row["session_hash"], row["csrf_token"]) if row else None

    async def end(self, session: WebSession) -> None:
        await self.store.end_web_sessions(session.session_hash)

    async def end_all(self) -> int:
        """``/admin web logout``: every session and every unused link."""
        return await self.store.end_web_sessions()


class WebDoor:
    """The login links ``/admin web`` sends, apart from the page's server: the owner's
    services hold the door while the page's actions hold the owner's services, so the door is
    built first. The server says which port it bound (an ephemeral one under test)."""

    def __init__(self, auth: WebAuth, config: WebConfig) -> None:
        self.auth = auth
        self.config = config
        self.port = config.port

    def bound(self, port: int) -> None:
        self.port = port

    @property
    def base_url(self) -> str:
        if self.config.public_url:
            return self.config.public_url
        host = self.config.listen
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{self.port}"

    async def login_link(self) -> str:
        return f"{self.base_url}/login/{await self.auth.new_login_token()}"

    async def logout_all(self) -> int:
        return await self.auth.end_all()
