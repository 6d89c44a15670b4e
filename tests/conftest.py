"""Shared fixtures: a fake LLM, a config in a temporary data directory, and a running gateway
with a recording channel that stands in for a platform."""

from __future__ import annotations

import asyncio
import faulthandler
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.base import DeliveryError, Receiver
from bot.app import App, build_app
from bot.config.model import Config
from bot.events import Attachment, ChatRef, Inbound, Outbound, Sender
from bot.store import Store
from bot.store.opening import open_store
from tests.fakes.fake_llm import FakeLLM
from tests.postgres_server import PostgresServer, PostgresUnavailable

OWNER_ID = 1
_message_ids = itertools.count(1000)

DATABASE_THREAD = "_connection_worker_thread"
"""In the name of every aiosqlite connection's thread: not a daemon, so one left open keeps
the process (pytest, or ``companion`` after an error) from ever exiting."""


def _database_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if DATABASE_THREAD in t.name}


EXIT_WITHIN_SECONDS = 300


def pytest_unconfigure() -> None:
    """A run whose process does not exit after its last test (a thread left running) prints
    every thread's stack and fails within minutes, instead of hanging until CI gives up."""
    faulthandler.dump_traceback_later(EXIT_WITHIN_SECONDS, exit=True)


@pytest.fixture(autouse=True)
def no_database_left_open() -> Iterator[None]:
    """Fail the test that leaves a SQLite connection open (the store, or any other): it
    would hang the run at exit, long after every test had passed, naming nothing."""
    before = _database_threads()
    yield
    for thread in _database_threads() - before:
        thread.join(timeout=5)  # a closed connection's thread ends as soon as it is let go
    left = _database_threads() - before
    if left:
        pytest.fail(
            f"the test left {len(left)} SQLite connection(s) open; close every store it opens"
            " (on every path, errors included)",
            pytrace=False,
        )


class RecordingChannel:
    """A platform stand-in: records every chunk sent, can be told to fail, holds the files
    users send and records every download of them."""

    platform = "test"
    connected = True

    def __init__(self, chunk_chars: int = 4000) -> None:
        self.sent: list[Outbound] = []
        self.files: list[tuple[ChatRef, str, bytes, str]] = []
        self.typing_calls = 0
        self.chunk_chars = chunk_chars
        self.fail_next: list[DeliveryError] = []
        self.fail_next_stream: list[Exception] = []
        """Errors the next ``open_stream`` calls raise (a channel whose preview is broken)."""
        self.receiver: Receiver | None = None
        self.held: dict[str, bytes] = {}
        """Files the platform holds by ref: documents users sent (:meth:`hold`)."""
        self.downloads: list[str] = []
        """Refs fetched with :meth:`download`, in order."""
        self._changed = asyncio.Condition()

    async def start(self, receiver: Receiver) -> None:
        self.receiver = receiver

    async def stop(self) -> None:
        self.receiver = None

    def split(self, text: str) -> list[str]:
        size = self.chunk_chars
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]

    async def send(self, message: Outbound) -> str | None:
        if self.fail_next:
            raise self.fail_next.pop(0)
        async with self._changed:
            self.sent.append(message)
            self._changed.notify_all()
        return f"out-{len(self.sent)}"

    async def typing(self, chat: ChatRef, partner_id: str | None = None) -> None:
        del chat, partner_id
        self.typing_calls += 1

    async def send_file(
        self, chat: ChatRef, filename: str, data: bytes, caption: str
    ) -> str | None:
        self.files.append((chat, filename, data, caption))
        await self.send(Outbound(chat, caption))
        return f"file-{len(self.files)}"

    max_download_bytes = 20 * 1024 * 1024

    def hold(self, filename: str, data: bytes) -> Attachment:
        """A document a user sends: the platform keeps it, the message carries its ref."""
        ref = f"file-{len(self.held) + 1}"
        self.held[ref] = data
        return Attachment(filename, ref, len(data))

    async def download(self, ref: str) -> bytes:
        self.downloads.append(ref)
        if ref not in self.held:
            raise DeliveryError(f"no file {ref}", retryable=False)
        return self.held[ref]

    def open_stream(
        self, chat: ChatRef, reply_to: str | None, partner_id: str | None = None
    ) -> None:
        del chat, reply_to, partner_id
        if self.fail_next_stream:
            raise self.fail_next_stream.pop(0)
        return None

    async def wait_sent(self, count: int, timeout: float = 5.0) -> list[Outbound]:
        async def enough() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.sent) >= count)

        try:
            await asyncio.wait_for(enough(), timeout)
        except TimeoutError:
            texts = [m.text[:60] for m in self.sent]
            raise AssertionError(f"expected {count} sends within {timeout}s, got {texts}") from None
        return self.sent

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat.chat_id == chat_id]


def dm(user_id: int | str, text: str, name: str = "Alice", **kwargs: Any) -> Inbound:
    return Inbound(
        ChatRef("test", str(user_id), "dm"),
        Sender("test", str(user_id), name, name.lower()),
        str(next(_message_ids)),
        text,
        datetime.now(UTC),
        **kwargs,
    )


def group_message(
    chat_id: str,
    user_id: int | str,
    text: str,
    name: str = "Bob",
    *,
    addressed: bool = True,
    **kwargs: Any,
) -> Inbound:
    """A message in a group; ``addressed``: it @mentions the bot (else it is chatter)."""
    thread = kwargs.pop("thread_id", None)
    kwargs.setdefault("mentioned", addressed)
    return Inbound(
        ChatRef("test", chat_id, "group", thread_id=thread, title="Tea club"),
        Sender("test", str(user_id), name, name.lower()),
        str(kwargs.pop("message_id", next(_message_ids))),
        text,
        datetime.now(UTC),
        **kwargs,
    )


def make_config(data_dir: Path, llm_url: str, **sections: dict[str, Any]) -> Config:
    raw: dict[str, Any] = {
        "llm": {
            "base_url": llm_url,
            "api_key": "test-key",
            "model": "fake-model",
            "max_retries": 0,
            "timeout": 10,
        },
        "storage": {"data_dir": str(data_dir)},
        "owner": {"timezone": "UTC"},
        "access": {"dm_policy": "open"},
        # reviews call the LLM in the background; tests of them turn this back on
        "memory": {"auto_memory": False},
    }
    for name, values in sections.items():
        raw.setdefault(name, {}).update(values)
    # the recording channel's owner is OWNER_ID on the "test" platform
    return Config.model_validate(raw)


@dataclass
class Harness:
    app: App
    channel: RecordingChannel
    llm: FakeLLM
    config: Config
    extra: dict[str, Any] = field(default_factory=dict)

    async def send(self, inbound: Inbound) -> None:
        await self.app.gateway.receive(inbound)

    async def settle(self, timeout: float = 60.0) -> None:
        """Wait until every turn has run; a turn stuck past ``timeout`` fails the test
        instead of freezing the whole run."""
        async with asyncio.timeout(timeout):
            await self.app.dispatcher.idle()


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as llm:
        yield llm


HarnessFactory = Callable[..., Any]


@pytest.fixture
async def harness_factory(tmp_path: Path, fake_llm: FakeLLM) -> AsyncIterator[Callable[..., Any]]:
    """Build (and later stop) gateways on one data directory; a second call is a restart."""
    apps: list[App] = []

    async def build(
        chunk_chars: int = 4000, channel: RecordingChannel | None = None, **sections: dict[str, Any]
    ) -> Harness:
        config = make_config(tmp_path / "data", fake_llm.base_url, **sections)
        channel = channel or RecordingChannel(chunk_chars)
        app = await build_app(config, {"test": channel})
        app.gateway.access.is_owner.keys.add(f"test:{OWNER_ID}")
        apps.append(app)
        await app.start()
        return Harness(app, channel, fake_llm, config)

    yield build
    for app in apps:
        await app.stop()


@pytest.fixture
async def harness(harness_factory: Callable[..., Any]) -> Harness:
    return await harness_factory()


# ---- a throwaway PostgreSQL server ----------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server, started by the first test that needs it. A machine
    without PostgreSQL fails those tests, naming what to install: they are never skipped."""
    try:
        server = PostgresServer.start()
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
async def postgres_database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """The URL of a new, empty database on the session's server, dropped after the test."""
    name = await postgres_server.create_database()
    yield postgres_server.url(name)
    await postgres_server.drop_database(name)


# ---- the store contract ---------------------------------------------------------------------

STORE_BACKENDS = ("sqlite", "postgres")
"""Every backend the store tests run against: a test that takes the ``store`` (or
``store_backend``) fixture is part of the contract every backend must keep."""


@dataclass
class StoreBackend:
    """One backend's database for one test; :meth:`open` again is a restart."""

    name: str
    location: Path | str

    async def open(self) -> Store:
        return await open_store(self.location)


@pytest.fixture(params=STORE_BACKENDS)
async def store_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    if request.param == "sqlite":
        yield StoreBackend("sqlite", tmp_path / "db.sqlite")
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = await server.create_database(template=await server.migrated_template())
    yield StoreBackend("postgres", server.url(name))
    await server.drop_database(name)


@pytest.fixture
async def store(store_backend: StoreBackend) -> AsyncIterator[Store]:
    opened = await store_backend.open()
    yield opened
    await opened.close()  # an open store's database thread would keep pytest from exiting


@pytest.fixture(params=STORE_BACKENDS)
async def storage_on_each_backend(
    request: pytest.FixtureRequest,
) -> AsyncIterator[dict[str, Any]]:
    """The ``[storage]`` settings of a gateway on each backend in turn: SQLite's default, or a
    fresh PostgreSQL database (dropped after the gateway stopped)."""
    if request.param == "sqlite":
        yield {}
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    name = await server.create_database(template=await server.migrated_template())
    yield {"database_url": server.url(name)}
    await server.drop_database(name)


@pytest.fixture
async def harness_on_each_backend(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory
) -> Harness:
    """A running gateway on each store backend in turn: what a module whose gateway tests are
    about the store's rules (visibility, leaks) uses as its ``harness``."""
    return await harness_factory(storage=storage_on_each_backend)
