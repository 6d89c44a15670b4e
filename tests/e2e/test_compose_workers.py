"""Workers as compose.yaml runs them serve one bot: no config file, only the environment.

Two ``companion run`` processes get what a ``worker`` container of compose.yaml gets — a
``.env`` of ``COMPANION_<SECTION>__<KEY>`` variables under the service's own ``environment``
(rendered from compose.yaml, so a change there reaches this test) — with the two things a
container has of its own here: the database URL names the test's PostgreSQL instead of the
``postgres`` service, and each worker's data directory stands for its container's ``/data``.
No ``--config``, and COMPANION_CONFIG is empty: a stray config.toml would not be read. A direct
message then gets exactly one reply, from whichever worker took it, and neither worker logs a
secret it read from the environment.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg

from tests.compose_file import worker_environment
from tests.e2e.cluster import child_environment
from tests.e2e.conftest import LLM_KEY, OWNER, TELEGRAM_TOKEN, World, assert_no_secrets
from tests.e2e.gateway_process import COMPANION, LOG_LINE_LIMIT_BYTES, ROOT, GatewayProcess
from tests.e2e.traffic import STEP_TIMEOUT_SECONDS, poll

USER = 5151
WORKERS = 2


def dotenv(world: World) -> dict[str, str]:
    """The operator's .env: the fakes stand for the LLM provider and Telegram."""
    return {
        "POSTGRES_PASSWORD": "not-used-here",
        "COMPANION_LLM__BASE_URL": world.llm.base_url,
        "COMPANION_LLM__API_KEY": LLM_KEY,
        "COMPANION_LLM__MODEL": "fake-model",
        "COMPANION_LLM__MAX_RETRIES": "0",
        "COMPANION_LLM__TIMEOUT": "30",
        "COMPANION_TELEGRAM__TOKEN": TELEGRAM_TOKEN,
        "COMPANION_TELEGRAM__BASE_URL": world.telegram.base_url,
        "COMPANION_TELEGRAM__POLL_TIMEOUT_SECONDS": "1",
        "COMPANION_TELEGRAM__WATCHDOG_SECONDS": "10",
        "COMPANION_OWNER__TELEGRAM_IDS": f"[{OWNER}]",
        "COMPANION_OWNER__TIMEZONE": "UTC",
        "COMPANION_ACCESS__DM_POLICY": "open",
        "COMPANION_MEMORY__AUTO_MEMORY": "false",
        "COMPANION_WORKERS__LEASE_SECONDS": "3",
        "COMPANION_WORKERS__HEARTBEAT_SECONDS": "1",
    }


async def start_worker(world: World, database_url: str, data_dir: Path) -> GatewayProcess:
    """``companion run`` with no config file, as the container's entrypoint runs it."""
    environment = {
        **child_environment(),
        **worker_environment(dotenv(world)),
        "COMPANION_STORAGE__DATABASE_URL": database_url,
        "COMPANION_STORAGE__DATA_DIR": str(data_dir),
    }
    process = await asyncio.create_subprocess_exec(
        *COMPANION,
        "run",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=ROOT,
        env=environment,
        limit=LOG_LINE_LIMIT_BYTES,
    )
    worker = GatewayProcess(process, world.tmp / f"{data_dir.name}.log")
    world.processes.append(worker)  # the world's teardown kills it
    await worker.wait_ready()
    return worker


async def count(database_url: str, sql: str) -> int:
    connection = await asyncpg.connect(database_url)
    try:
        return int(await connection.fetchval(sql))
    finally:
        await connection.close()


async def test_workers_configured_by_the_environment_alone_answer_a_message_once(
    world: World, postgres_database: str
) -> None:
    workers = [
        await start_worker(world, postgres_database, world.tmp / f"worker-{slot}")
        for slot in range(WORKERS)
    ]

    async def both_registered() -> bool:
        return await count(postgres_database, "SELECT COUNT(*) FROM workers") == WORKERS

    await poll(both_registered, "both workers in the database's registry")

    tag = world.tag()
    world.send(USER, f"hello there #{tag}")
    await world.wait_for_reply(tag, timeout=STEP_TIMEOUT_SECONDS)

    async def nothing_pending() -> bool:
        unfinished = "SELECT COUNT(*) FROM messages WHERE status IN ('pending', 'delivering')"
        return await count(postgres_database, unfinished) == 0

    await poll(nothing_pending, "the reply recorded and nothing left pending")
    later = world.tag()  # a second message in the same chat: a late double would come first
    world.send(USER, f"still there? #{later}")
    await world.wait_for_reply(later, timeout=STEP_TIMEOUT_SECONDS)

    assert len(world.replies_naming(tag)) == 1, world.telegram.recent_calls()
    assert world.model.chat_requests[tag] == 1
    assert all(worker.running for worker in workers)
    assert [worker.errors() for worker in workers if worker.errors()] == []
    assert_no_secrets("\n".join(worker.output for worker in workers))
