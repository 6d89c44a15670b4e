"""A world for whole-process tests: fake Telegram and a scripted fake LLM in this process, the
gateway in a child process configured to reach them, and checks on what it left on disk."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from partners.catalog import PartnerCatalog
from partners.changelog import CHANGELOG
from partners.memory_format import BULLET, ENTRY_ID
from tests.card_fixtures import publish
from tests.e2e.cluster import Cluster
from tests.e2e.gateway_process import GatewayProcess, write_config
from tests.e2e.model import ScriptedModel
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.fake_telegram import Call, FakeTelegram
from tests.postgres_server import PostgresServer

TELEGRAM_TOKEN = "5550001:E2E-SECRET-telegram-token"
LLM_KEY = "sk-e2e-SECRET-llm-key-0042"
SECRETS = (TELEGRAM_TOKEN, TELEGRAM_TOKEN.split(":", 1)[1], LLM_KEY)
OWNER = 4242
BOT_USERNAME = "companion_bot"
REPLY_TIMEOUT_SECONDS = 60.0


@dataclass
class World:
    telegram: FakeTelegram
    llm: FakeLLM
    model: ScriptedModel
    tmp: Path
    processes: list[GatewayProcess] = field(default_factory=list)
    _tags: int = 0

    @property
    def data_dir(self) -> Path:
        return self.tmp / "data"

    def config(self, **sections: dict[str, Any] | list[dict[str, Any]] | None) -> Path:
        """The child's config.toml: our fakes, an owner, open DMs; ``sections`` add or
        override keys (a list value is an array of tables, e.g. ``bindings``; None leaves a
        section out, e.g. ``telegram=None``)."""
        base: dict[str, Any] = {
            "llm": {
                "base_url": self.llm.base_url,
                "api_key": LLM_KEY,
                "model": "fake-model",
                "max_retries": 0,
                "timeout": 30,
            },
            "storage": {"data_dir": self.data_dir},
            "owner": {"telegram_ids": [OWNER], "timezone": "UTC"},
            "access": {"dm_policy": "open"},
            "memory": {"auto_memory": False},
            "telegram": {
                "token": TELEGRAM_TOKEN,
                "base_url": self.telegram.base_url,
                "poll_timeout_seconds": 1,
                "watchdog_seconds": 10,
            },
        }
        for name, values in sections.items():
            if values is None:
                base.pop(name, None)
            elif isinstance(values, list):
                base[name] = values
            else:
                base.setdefault(name, {}).update(values)
        return write_config(self.tmp / "config.toml", base)

    async def start(
        self,
        config: Path | None = None,
        *,
        file_size_limit: int | None = None,
        options: tuple[str, ...] = (),
    ) -> GatewayProcess:
        """Start ``companion run`` and wait until it polls Telegram."""
        process = await GatewayProcess.start(
            config or self.config(),
            self.tmp / f"gateway-{len(self.processes) + 1}.log",
            file_size_limit=file_size_limit,
            options=options,
        )
        self.processes.append(process)
        await process.wait_ready()
        return process

    def add_partner(self, partner_id: str, name: str) -> None:
        catalog = PartnerCatalog(self.data_dir / "partners")
        catalog.ensure_example()
        publish(catalog.create(partner_id, name).dir)  # a new partner is private until published

    # ---- traffic ---------------------------------------------------------------------

    def tag(self) -> str:
        self._tags += 1
        return f"m{self._tags}"

    def send(self, chat_id: int, text: str, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("first_name", f"User{chat_id}")
        return self.telegram.send_user_message(chat_id=chat_id, text=text, **kwargs)

    def replies(self, chat_id: int | None = None) -> list[Call]:
        """Successful sendMessage calls (a 5xx answer counts as not sent)."""
        return self.telegram.sent("sendMessage", chat_id)

    def visible(self, chat_id: int | None = None) -> list[str]:
        """What users saw: successful sends, plus sends that took effect but whose answer was
        lost (held with ``after_effect`` when the gateway died)."""
        lost_answers = [
            call
            for call in self.telegram.calls
            if call.method == "sendMessage"
            and call.status == 499
            and call.result is not None
            and (chat_id is None or call.chat_id == chat_id)
        ]
        return [call.text or "" for call in [*self.replies(chat_id), *lost_answers]]

    def replies_naming(self, tag: str) -> list[str]:
        pattern = re.compile(rf"#{tag}\b")
        return [text for text in self.visible() if pattern.search(text)]

    async def wait_for_reply(self, tag: str, timeout: float = REPLY_TIMEOUT_SECONDS) -> str:
        found = await self.telegram.wait_until(
            lambda: self.replies_naming(tag), timeout, f"a reply naming #{tag}"
        )
        return found[0]

    # ---- what is on disk -------------------------------------------------------------

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Read the gateway's database (read-only, beside a running gateway)."""
        db = sqlite3.connect(f"file:{self.data_dir / 'gateway.db'}?mode=ro", uri=True)
        try:
            return list(db.execute(sql, params))
        finally:
            db.close()

    def integrity(self) -> str:
        return str(self.query("PRAGMA integrity_check")[0][0])

    def memory_problems(self) -> list[str]:
        """Every memory file decodes and every id-tagged line is a well-formed entry; every
        changelog line is a JSON record."""
        problems = []
        roots = [self.data_dir / "owner", *(self.data_dir / "partners").glob("*")]
        for root in roots:
            for path in sorted(root.rglob("*.md")):
                try:
                    text = path.read_bytes().decode("utf-8")
                except UnicodeDecodeError as exc:
                    problems.append(f"{path}: not UTF-8 ({exc})")
                    continue
                for number, line in enumerate(text.splitlines(), 1):
                    if "<!-- m_" in line and not (BULLET.match(line) and ENTRY_ID.search(line)):
                        problems.append(f"{path}:{number}: damaged entry {line!r}")
            changelog = root / CHANGELOG
            if changelog.exists():
                for number, line in enumerate(changelog.read_text("utf-8").splitlines(), 1):
                    try:
                        json.loads(line)
                    except ValueError:
                        problems.append(f"{changelog}:{number}: not JSON {line[:80]!r}")
        return problems

    def memory_text(self, partner: str = "example") -> str:
        """Every memory file of a partner, concatenated."""
        root = self.data_dir / "partners" / partner
        return "\n".join(p.read_text("utf-8") for p in sorted(root.rglob("*.md")))


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    model = ScriptedModel()
    async with (
        FakeTelegram(token=TELEGRAM_TOKEN, bot_username=BOT_USERNAME) as telegram,
        FakeLLM(responder=model) as llm,
    ):
        world = World(telegram, llm, model, tmp_path)
        try:
            yield world
        finally:
            model.release()
            for process in world.processes:
                await process.close()


def assert_no_secrets(text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"secrets in the gateway's output: {leaked}"


ClusterFactory = Callable[..., Awaitable[Cluster]]


@pytest.fixture
async def cluster_of(
    world: World, postgres_server: PostgresServer, postgres_database: str
) -> AsyncIterator[ClusterFactory]:
    """Start ``size`` workers on the test's PostgreSQL database (tests/e2e/cluster.py)."""
    clusters: list[Cluster] = []

    async def start(size: int, **settings: dict[str, Any]) -> Cluster:
        cluster = Cluster(world, postgres_server, postgres_database, size, settings)
        clusters.append(cluster)
        await cluster.start_all()
        return cluster

    yield start
    for cluster in clusters:
        for slot in list(cluster.paused):
            cluster.resume(slot)  # the world's teardown kills them; a stopped one would linger
