"""The webhook listener: Telegram POSTs each update; it is answered only once it is stored.

python-telegram-bot's own webhook server answers 200 before the handler has run, so a crash in
between loses the update (docs/architecture.md, "Several workers"). This small aiohttp server
awaits the handler first. Every request must carry the secret registered with ``setWebhook`` in
``X-Telegram-Bot-Api-Secret-Token``; anything else gets 403 and is never looked at."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

Handler = Callable[[dict[str, Any]], Awaitable[bool]]
"""Handles one update; False if it could not be stored (Telegram must send it again)."""


class WebhookServer:
    def __init__(self, listen: str, port: int, url: str, secret: str, handle: Handler) -> None:
        self.listen = listen
        self.port = port
        self.path = urlsplit(url).path or "/"
        self._secret = secret.encode()
        self._handle = handle
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self.path, self._on_update)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self.listen, self.port).start()
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _on_update(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            return web.Response(status=403)
        try:
            payload = await request.json()
        except ValueError:
            return web.Response(status=400)
        if not isinstance(payload, dict):
            return web.Response(status=400)
        if not await self._handle(payload):
            return web.Response(status=503)  # not stored: Telegram sends it again later
        # Only now, with the update stored, may Telegram forget it.
        return web.Response(status=200)
