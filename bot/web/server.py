"""The web page's server: an aiohttp application on ``[web] listen``/``port``, started and
stopped with the gateway, plus the login link that ``/admin web`` sends."""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from bot.config.model import Config, ConfigError
from bot.web import (
    pages_audit,
    pages_journals,
    pages_memory,
    pages_partners,
    pages_people,
    pages_sessions,
    pages_usage,
)
from bot.web.actions import WEB_ACTOR
from bot.web.auth import COOKIE_NAME, WebDoor
from bot.web.pages import WebParts
from bot.web.security import add_security_headers, answer_errors, require_owner, session_of

logger = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in</title><link rel="stylesheet" href="/static/style.css"></head>
<body><main class="login"><h1>Companion gateway</h1>
<form method="post"><button type="submit">Log in</button></form>
<p class="hint">This link works once, for ten minutes.</p></main></body></html>"""
EXPIRED_PAGE = (
    "<!doctype html><title>Link used</title><p>This login link has expired or was used "
    "already. Send <code>/admin web</code> in your direct chat with the bot for a new one.</p>"
)


class WebServer:
    def __init__(self, config: Config, parts: WebParts, door: WebDoor) -> None:
        self.config = config
        self.parts = parts
        self.door = door
        self.auth = door.auth
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        return self.door.port

    def application(self) -> web.Application:
        app = web.Application(middlewares=[answer_errors, require_owner(self.auth)])
        app.on_response_prepare.append(add_security_headers)
        app.router.add_get("/login/{token}", self.login_page)
        app.router.add_post("/login/{token}", self.login)
        app.router.add_post("/logout", self.logout)
        app.router.add_get("/", self.home)
        app.router.add_static("/static", STATIC_DIR)
        for module in (
            pages_partners,
            pages_memory,
            pages_journals,
            pages_sessions,
            pages_people,
            pages_usage,
            pages_audit,
        ):
            app.router.add_routes(module.routes(self.parts))
        return app

    async def start(self) -> None:
        self._runner = web.AppRunner(self.application(), access_log=None)
        await self._runner.setup()
        listen, port = self.config.web.listen, self.config.web.port
        try:
            await web.TCPSite(self._runner, listen, port).start()
        except OSError as exc:
            await self.stop()
            raise ConfigError(
                f"web: cannot listen on {listen}:{port} ({exc.strerror}); pick another port "
                "under [web] in config.toml, or stop what holds this one"
            ) from exc
        if self.config.web.port == 0 and self._runner.addresses:
            self.door.bound(int(self._runner.addresses[0][1]))
        logger.info("web page listening on %s:%d", self.config.web.listen, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- handlers ------------------------------------------------------------------------

    async def login_page(self, _request: web.Request) -> web.Response:
        """The link itself spends nothing (a link preview may fetch it): the button does."""
        return web.Response(text=LOGIN_PAGE, content_type="text/html")

    async def login(self, request: web.Request) -> web.StreamResponse:
        opened = await self.auth.redeem(request.match_info["token"])
        if opened is None:
            raise web.HTTPForbidden(text=EXPIRED_PAGE, content_type="text/html")
        await self.parts.store.audit(WEB_ACTOR, "web login")
        response = web.Response(status=303, headers={"Location": "/"})
        response.set_cookie(
            COOKIE_NAME,
            opened.cookie,
            max_age=int(self.auth.session_seconds),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.auth.secure_cookie,
        )
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        await self.auth.end(session_of(request))
        response = web.Response(status=303, headers={"Location": "/static/logged-out.html"})
        response.del_cookie(COOKIE_NAME, path="/")
        return response

    async def home(self, request: web.Request) -> web.Response:
        return await pages_audit.status(self.parts, request)
