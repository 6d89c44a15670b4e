"""The stream an MCP session reads its server's messages from, watched for its end: the SDK's
session tells only a call made after that the server is gone, as if it had died during the
call; the gateway needs to know at once (``bot/services/mcp_server.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio


class WatchedStream:
    """What the SDK reads from a server, telling when it ends (the program exited, the
    connection closed): ``ended`` is set then. The SDK's session only says so to a call made
    after, as if the server had died during that call."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self.ended = ended

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message, which the SDK looks for on its streams."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WatchedStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
