"""The HTTP client of Telegram's long poll, one per stretch of polling.

A getUpdates cut off while its connection is being set up (the watchdog restarting a poll,
the leadership lost) can leave httpcore's pool with a connection that is neither used nor
closed: a new connection the pool assigned to the request, or one that connected but never
took the request. The poll's pool holds one connection, so every later getUpdates would wait
for the pool in vain ("Pool timeout: All connections in the connection pool are occupied"),
for as long as the process runs. So a client whose request was cut off or failed on the way
is closed and never used again: the poller takes a fresh :class:`PollClient` when it starts
(each time this worker becomes leader) and after each such request.
"""

from __future__ import annotations

from typing import Any

from telegram import Bot
from telegram.request import HTTPXRequest

from bot.config.platforms import TelegramConfig


class PollClient:
    """A python-telegram-bot :class:`~telegram.Bot` on a request object of its own, with one
    connection, used only for getUpdates (a long poll must never wait for, or block, a send)."""

    def __init__(self, config: TelegramConfig) -> None:
        assert config.token is not None  # the channel refuses to start without one
        self._request = HTTPXRequest(connection_pool_size=1)
        options: dict[str, Any] = {"base_url": config.base_url} if config.base_url else {}
        # getUpdates goes through get_updates_request; nothing else is sent with this Bot
        self.bot = Bot(
            config.token.get_secret_value(),
            request=self._request,
            get_updates_request=self._request,
            **options,
        )

    async def close(self) -> None:
        """Close its connection, whatever state a cut-off request left it in."""
        await self._request.shutdown()
