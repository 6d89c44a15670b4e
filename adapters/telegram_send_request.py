"""The HTTP request object of the Bot that sends (messages, edits, typing, files).

httpcore's pool can be left with a connection that is neither used nor closed when a request
is cancelled while its connection is being set up or its request is under way (the same
behaviour that made the long poll a client of its own, ``adapters/telegram_poll_client.py``).
Sends are cancelled all the time: a turn's typing indicator when its reply is ready, a
stream's edits when it ends, a turn at shutdown. Each such connection stays taken for as long
as the process runs, and once the pool's are all taken every send fails with "Pool timeout".
So a send's HTTP exchange is not cancelled with its caller: it runs on in a task of its own,
bounded by its own timeouts, and gives its connection back to the pool when it ends. The
caller is cancelled at once, as before; the request it made may still reach Telegram (as one
cut off a moment later would have).
"""

from __future__ import annotations

import asyncio
import contextlib

from telegram._utils.types import ODVInput
from telegram.request import BaseRequest, HTTPXRequest, RequestData


class SendRequest(HTTPXRequest):
    """python-telegram-bot's HTTPX request whose exchanges finish even when their caller is
    cancelled."""

    def __init__(self, connection_pool_size: int, pool_timeout: float) -> None:
        super().__init__(connection_pool_size=connection_pool_size, pool_timeout=pool_timeout)
        self._finishing: set[asyncio.Task[tuple[int, bytes]]] = set()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        exchange = asyncio.ensure_future(
            super().do_request(
                url, method, request_data, read_timeout, write_timeout, connect_timeout,
                pool_timeout,
            )
        )  # fmt: skip
        self._finishing.add(exchange)
        exchange.add_done_callback(self._finished)
        return await asyncio.shield(exchange)

    def _finished(self, exchange: asyncio.Task[tuple[int, bytes]]) -> None:
        self._finishing.discard(exchange)
        if not exchange.cancelled():
            exchange.exception()  # a cancelled caller's failure is nobody's to log

    async def shutdown(self) -> None:
        """Cut off the exchanges still finishing (the pool closes with the client anyway)."""
        for exchange in list(self._finishing):
            exchange.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._finishing, return_exceptions=True)
        await super().shutdown()
