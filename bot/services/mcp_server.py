"""One MCP server as the gateway keeps it: started on first use, one session shared by every
partner that uses it, started again after a wait that doubles when it died or could not
start, and stopped with the gateway.

The session lives in a task of its own (the SDK's transports and sessions must be entered and
left in one task); calls reach it from any turn. Every wait is bounded: a call by the server's
``timeout_seconds``, a start by its ``start_seconds``. A server that hangs, dies or writes
nonsense costs one turn that long at most and becomes a :class:`ServerFault` the model reads as
a tool error.

A server that dies while no call is waiting (its program exits, its connection closes) is
noticed when it happens: the session's task watches the stream the SDK reads from
(:class:`WatchedStream`), ends the session and notes the failure. The next call starts it
again, waiting out what is left of the backoff when that is short, instead of failing on the
dead session as if the server had died during the call. So does a call that the server
refuses because it no longer knows the session (an HTTP server restarted meanwhile): nothing
ran, so it is sent once more on a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    PaginatedRequestParams,
)

from bot.config.mcp import ServerConfig
from bot.services.mcp_listing import ListedTool, ServerFault
from bot.services.mcp_stream import WatchedStream

logger = logging.getLogger(__name__)

MAX_BACKOFF_SECONDS = 300.0
RESTART_WAIT_SECONDS = 5.0
"""How long a turn waits for a server to start when its last start failed; the start itself
goes on in the background (up to ``start_seconds``), so a server that hangs at start costs a
turn the whole ``start_seconds`` once, then this long at most."""
MAX_LISTED_PAGES = 10
"""Pages of a server's tool list read; a server that pages on forever is not waited for."""
DIED_IDLE = "it stopped while no call was waiting"
SESSION_LOST = re.compile(r"\bsession (?:not found|terminated|expired)\b", re.IGNORECASE)
"""An HTTP server's answer (404) to a session it does not know, as the SDK passes it on: its
server says "Session not found", other servers' codes vary, and the SDK's client says
"Session terminated" when the body is not JSON-RPC."""


class McpServer:
    """One configured server and its shared session."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        backoff_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.config = config
        self.backoff_seconds = backoff_seconds
        self.clock = clock
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[list[ListedTool]] | None = None
        self._session: ClientSession | None = None
        self._ended: asyncio.Event | None = None
        """Set when the running session's server went away (see :class:`WatchedStream`)."""
        self._tools: list[ListedTool] | None = None
        self._stopping = asyncio.Event()
        self._failures = 0
        self._start_failed = False
        self._retry_at = 0.0
        self.last_error: str | None = None
        """Why it last failed to start or died (None: it has not failed since it last ran)."""
        self.calls = 0
        """Tool calls sent to it since the gateway started."""

    @property
    def running(self) -> bool:
        return self._session is not None

    @property
    def starting(self) -> bool:
        """A start is under way (a turn, or the background after a turn stopped waiting)."""
        return self._starting is not None

    async def tools(self) -> list[ListedTool]:
        """Its tools, starting it if it is not running (one start, whoever asks); ServerFault
        while it cannot start, and until its wait after a failure is over, so no turn waits
        on a failing server twice."""
        async with self._lock:
            if self._session is not None and self._tools is not None:
                return self._tools
            if self._starting is None:
                self._starting = self._start_task()
            starting = self._starting
        wait = self.config.start_seconds
        if self._start_failed:
            wait = min(wait, RESTART_WAIT_SECONDS)
        wait += max(0.0, self._retry_at - self.clock())
        try:
            return await asyncio.wait_for(asyncio.shield(starting), wait)
        except TimeoutError:
            raise ServerFault(f"{self.name} is still starting") from None

    def _start_task(self) -> asyncio.Task[list[ListedTool]]:
        """A start now, or once what is left of the backoff after a death, when that is
        short; ServerFault while a failed start or a longer backoff is waited out."""
        delay = self._retry_at - self.clock()
        if delay > 0 and (self._start_failed or delay > RESTART_WAIT_SECONDS):
            raise ServerFault(f"{self.name} is not available ({self.last_error})")
        task = asyncio.create_task(self._start(max(delay, 0.0)), name=f"start {self.name}")
        task.add_done_callback(_retrieved)
        return task

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """One call of ``tool``; ServerFault when the server times out or dies meanwhile."""
        session = await self._live_session()
        try:
            result = await self._call_on(session, tool, arguments)
        except MCPError as exc:
            if not _session_lost(exc):
                raise ServerFault(f"{self.name} refused the call: {describe(exc)}") from None
            # the server forgot the session (it restarted): nothing ran, so ask once more
            await self._died(session, "its session ended", failed=False)
            try:
                result = await self._call_on(await self._live_session(), tool, arguments)
            except MCPError as again:
                raise ServerFault(f"{self.name} refused the call: {describe(again)}") from None
        self._failures = 0
        return result

    async def _live_session(self) -> ClientSession:
        """The running session, started (again) if need be. One whose server went away since
        its last call is started again first: a call on it would fail though nothing ran."""
        await self.tools()
        session, ended = self._session, self._ended
        if session is not None and ended is not None and ended.is_set():
            await self._died(session, DIED_IDLE)
            await self.tools()
            session = self._session
        if session is None:
            raise ServerFault(f"{self.name} is not running")
        return session

    async def _call_on(
        self, session: ClientSession, tool: str, arguments: dict[str, Any]
    ) -> CallToolResult:
        """One call on ``session``; ServerFault for a timeout or a server that died during
        it, the SDK's MCPError for a refusal."""
        self.calls += 1
        timeout = self.config.timeout_seconds
        try:
            # The SDK's own timeout answers the request; ours also covers a wait it does not.
            return await asyncio.wait_for(
                session.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout + 1
            )
        except TimeoutError:
            raise ServerFault(f"{self.name} did not answer within {timeout:g} seconds") from None
        except MCPError as exc:
            if _session_lost(exc):
                raise
            if exc.code == REQUEST_TIMEOUT:
                raise ServerFault(
                    f"{self.name} did not answer within {timeout:g} seconds"
                ) from None
            if exc.code != CONNECTION_CLOSED:
                raise
            await self._died(session, "it stopped during a call")
            raise ServerFault(
                f"{self.name} stopped during the call; it will be restarted"
            ) from None

    async def stop(self) -> None:
        """Stop the session and its program (the gateway is stopping)."""
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, ServerFault):
                await starting
        async with self._lock:
            await self._teardown()

    async def _start(self, delay: float = 0.0) -> list[ListedTool]:
        """Start the program (or open the address) after ``delay`` and list its tools, in the
        background of the turns that wait for it; a failure is noted and waited out before
        the next try."""
        if delay > 0:
            await asyncio.sleep(delay)  # the rest of the backoff after a death
        ready: asyncio.Future[list[ListedTool]] = asyncio.get_running_loop().create_future()
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready), name=f"mcp server {self.name}")
        try:
            tools = await asyncio.wait_for(asyncio.shield(ready), self.config.start_seconds)
        except TimeoutError:
            why = f"it did not start within {self.config.start_seconds:g} seconds"
        except Exception as exc:
            why = f"it could not start: {describe(exc)}"
        else:
            self._tools, self._starting, self._start_failed = tools, None, False
            logger.info("MCP server %s started with %d tools", self.name, len(tools))
            return tools
        async with self._lock:
            self._starting, self._start_failed = None, True
            await self._teardown()
            self._note_failure(why)
        raise ServerFault(f"{self.name} is not available ({why})")

    async def _hold(self, ready: asyncio.Future[list[ListedTool]]) -> None:
        """The session's own task: open it, list the tools, keep it until it is stopped or
        its server goes away (then the death is noted here: no call may be waiting)."""
        ended = asyncio.Event()
        served = False
        try:
            async with self._transport() as (read, write):
                watched = WatchedStream(read, ended)
                async with ClientSession(watched, write) as session:
                    await session.initialize()
                    tools = await list_tools(session)
                    self._session, self._ended, served = session, ended, True
                    ready.set_result(tools)
                    await _first_set(self._stopping, ended)
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                logger.warning("MCP server %s stopped: %s", self.name, describe(exc))
        finally:
            self._session, self._ended = None, None
        if served and ended.is_set() and not self._stopping.is_set():
            self._tools = None
            self._note_failure(DIED_IDLE)

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.config
        if config.url is not None:
            headers = {k: v.get_secret_value() for k, v in config.headers.items()}
            timeout = httpx2.Timeout(config.timeout_seconds, read=300.0)
            async with (
                httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
                streamable_http_client(config.url, http_client=client) as streams,
            ):
                yield streams
            return
        assert config.command is not None
        params = StdioServerParameters(
            command=config.command,
            args=config.args,
            env={k: v.get_secret_value() for k, v in config.env.items()} or None,
            cwd=config.cwd,
        )
        async with stdio_client(params) as streams:
            yield streams

    async def _died(self, session: ClientSession, why: str, *, failed: bool = True) -> None:
        """End ``session``; ``failed``: its server failed (the backoff grows), else it only
        lost the session and may be asked again at once."""
        async with self._lock:
            if self._session is not session:  # another call found it dead first
                return
            await self._teardown()
            if failed:
                self._note_failure(why)
            else:
                logger.info("MCP server %s: %s; starting a new session", self.name, why)

    def _note_failure(self, why: str) -> None:
        """Wait before the next start: the backoff, doubled for each failure in a row."""
        self._failures += 1
        wait = min(self.backoff_seconds * 2 ** (self._failures - 1), MAX_BACKOFF_SECONDS)
        self._retry_at = self.clock() + wait
        if self.last_error != why:  # once per episode, not once per attempt
            logger.warning("MCP server %s: %s; next try in %.0f s", self.name, why, wait)
        self.last_error = why

    async def _teardown(self) -> None:
        task, self._task = self._task, None
        self._tools = None
        if task is None:
            return
        self._stopping.set()
        try:
            await asyncio.wait_for(task, 10)
        except TimeoutError:  # the transport bounds its own shutdown; this is a last guard
            task.cancel()
        except Exception:
            logger.debug("MCP server %s: error while stopping", self.name, exc_info=True)


def _session_lost(exc: MCPError) -> bool:
    """The server no longer knows the session (see :data:`SESSION_LOST`): nothing ran."""
    return SESSION_LOST.search(exc.message or "") is not None


async def _first_set(*events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set."""
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _retrieved(task: asyncio.Task[list[ListedTool]]) -> None:
    """A start's failure was noted; no turn may be left to read it (they stopped waiting)."""
    if not task.cancelled():
        task.exception()


async def list_tools(session: ClientSession) -> list[ListedTool]:
    """Every tool the server lists (a bounded number of pages)."""
    found: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_LISTED_PAGES):
        if cursor is None:
            page = await session.list_tools()
        else:
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        for tool in page.tools:
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            found.append(ListedTool(tool.name, tool.description or "", dict(schema)))
        cursor = page.next_cursor
        if cursor is None:
            break
    return found


def describe(exc: BaseException) -> str:
    """A fault in a few words, for logs, the model and ``/admin status``."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return describe(exc.exceptions[0])
    if isinstance(exc, FileNotFoundError):
        return f"no such program {exc.filename!r}" if exc.filename else "no such program"
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
