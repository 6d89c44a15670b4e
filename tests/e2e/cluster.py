"""Several ``companion run`` workers on one PostgreSQL database, for the failover tests.

The world of ``tests/e2e/conftest.py`` (the fake Bot API and the scripted fake LLM in this process)
is shared by every worker; each worker is a child process with a data directory of its own
(docs/architecture.md "Decisions": workers share nothing but the database) and the test session's
throwaway PostgreSQL server as its ``[storage] database_url``. A :class:`Cluster` starts, kills,
pauses and resumes workers by slot, reads the database beside them, and reads memory through
``companion memory export`` — the same command an owner runs, whichever backend holds the
documents."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg

from tests.e2e.gateway_process import COMPANION, ROOT, GatewayProcess
from tests.postgres_server import PostgresServer

if TYPE_CHECKING:  # conftest builds clusters in a fixture: no import of it at run time
    from tests.e2e.conftest import World

WORKER_SECTION: dict[str, Any] = {"lease_seconds": 3, "heartbeat_seconds": 1}
"""``[workers]`` for a test of several: short leases, so a paused or killed worker's chats are
taken over within seconds of the test, not the default's tens of seconds."""
CLI_TIMEOUT_SECONDS = 60.0


@dataclass
class Cluster:
    """Workers by slot (0..size-1) on one database; a slot's worker can die and come back."""

    world: World
    server: PostgresServer
    database_url: str
    size: int
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra config sections every worker gets (``memory={"auto_memory": True}``,
    ``workers=WORKER_SECTION``)."""
    workers: dict[int, GatewayProcess] = field(default_factory=dict)
    paused: set[int] = field(default_factory=set)
    _exports: Iterator[int] = field(default_factory=itertools.count)

    def config(self, slot: int) -> Path:
        """Worker ``slot``'s config.toml: the world's fakes, the shared database, its own
        data directory."""
        written = self.world.config(
            storage={
                "data_dir": self.world.tmp / f"worker-{slot}",
                "database_url": self.database_url,
            },
            **self.settings,
        )
        return written.replace(self.world.tmp / f"worker-{slot}.toml")

    async def start(self, slot: int) -> GatewayProcess:
        worker = await self.world.start(self.config(slot))
        self.workers[slot] = worker
        return worker

    async def start_all(self) -> None:
        # one after another: the first migrates the database, the others find it ready
        for slot in range(self.size):
            await self.start(slot)

    async def kill(self, slot: int) -> None:
        """kill -9 (a paused worker is killed as it is: SIGKILL needs no SIGCONT)."""
        await self.workers[slot].kill()
        self.paused.discard(slot)

    def pause(self, slot: int) -> None:
        """SIGSTOP: the process keeps its connections and its leases' rows, and does nothing."""
        os.kill(self.workers[slot].pid, signal.SIGSTOP)
        self.paused.add(slot)

    def resume(self, slot: int) -> None:
        os.kill(self.workers[slot].pid, signal.SIGCONT)
        self.paused.discard(slot)

    def alive(self) -> list[int]:
        return [slot for slot, worker in self.workers.items() if worker.running]

    # ---- the database beside the workers ------------------------------------------------

    async def query(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        connection = await asyncpg.connect(self.database_url)
        try:
            return list(await connection.fetch(sql, *args))
        finally:
            await connection.close()

    async def recorded(self, chat_id: int, platform_message_id: int) -> bool:
        """Whether a worker recorded the message Telegram made of one of its sends."""
        rows = await self.query(
            "SELECT 1 FROM deliveries d JOIN messages m ON m.id = d.message_id"
            " WHERE m.chat_key = $1 AND d.platform_message_id = $2",
            f"telegram:{chat_id}",
            str(platform_message_id),
        )
        return bool(rows)

    async def pending_tags(self, tags: Iterable[str]) -> set[str]:
        """The tags whose inbound message still waits for (or is inside) its turn."""
        rows = await self.query(
            "SELECT text FROM messages WHERE role = 'user' AND status IN ('pending', 'delivering')"
        )
        texts = [str(row["text"]) for row in rows]
        return {tag for tag in tags if any(f"#{tag} " in f"{text} " for text in texts)}

    async def unfinished(self) -> int:
        [row] = await self.query(
            "SELECT COUNT(*) AS n FROM messages WHERE status IN ('pending', 'delivering')"
        )
        return int(row["n"])

    async def sessions_of(self, chats: Iterable[int]) -> str:
        """These chats' sessions with their review state, and their messages in id order:
        what a test that timed out waiting for a review shows."""
        keys = [f"telegram:{chat}" for chat in chats]
        sessions = await self.query(
            "SELECT id, chat_key, ended_at, reviewed_upto, review_due_at, review_attempts,"
            " review_error FROM sessions WHERE chat_key = ANY($1) ORDER BY created_at",
            keys,
        )
        messages = await self.query(
            "SELECT id, chat_key, session_id, role, status, left(text, 50) AS text"
            " FROM messages WHERE chat_key = ANY($1) ORDER BY id",
            keys,
        )
        return "\n".join(str(dict(row)) for row in (*sessions, *messages))

    # ---- memory, as the owner reads it ---------------------------------------------------

    async def memory_text(self, partner: str, users: Iterable[int]) -> str:
        """The partner's own memory and each user's file, as ``companion memory export``
        writes them (any worker's config will do: the documents are in the database). One
        command for all of them: a command per file took most of a poll's time on a busy
        machine."""
        target = self.world.tmp / f"export-{next(self._exports)}"
        await self._cli("memory", "export", partner, str(target))
        names = ["MEMORY.md", *(f"users/telegram-{user}.md" for user in users)]
        return "\n".join(
            f"## {name}\n{(target / name).read_text('utf-8')}"
            for name in names
            if (target / name).exists()
        )

    async def _cli(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            *COMPANION,
            "--config",
            str(self.world.tmp / "worker-0.toml"),
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env=child_environment(),
        )
        out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT_SECONDS)
        assert process.returncode == 0, f"companion {' '.join(args)}: {err.decode()[-2000:]}"
        return out.decode()


def child_environment() -> dict[str, str]:
    """The child reads its settings from the config file only (as ``GatewayProcess`` does)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "COMPANION_"))}
