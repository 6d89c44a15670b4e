"""The throwaway PostgreSQL server the store's tests run on (tests/postgres_server.py): started
once per session from the machine's own installation, a fresh database per test, reachable only
through its own socket (by the tests and by the gateways they start as child processes), never
run as root, restartable mid-test, and a clear failure where PostgreSQL is missing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import pytest

from bot.workers.worker import process_alive
from tests.postgres_server import (
    PostgresServer,
    PostgresUnavailable,
    find_bin_dir,
    reap_orphans,
    server_account,
)


async def test_a_test_database_starts_empty_and_takes_writes(postgres_database: str) -> None:
    connection = await asyncpg.connect(postgres_database)
    try:
        tables = await connection.fetchval(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        )
        await connection.execute("CREATE TABLE notes (text TEXT)")
        await connection.execute("INSERT INTO notes VALUES ('kept')")
        assert tables == 0
        assert await connection.fetchval("SELECT text FROM notes") == "kept"
    finally:
        await connection.close()


async def test_databases_of_two_tests_do_not_share_tables(postgres_server: PostgresServer) -> None:
    first, second = await postgres_server.create_database(), await postgres_server.create_database()
    try:
        one = await asyncpg.connect(postgres_server.url(first))
        two = await asyncpg.connect(postgres_server.url(second))
        await one.execute("CREATE TABLE notes (text TEXT)")
        seen = await two.fetchval("SELECT to_regclass('public.notes') IS NOT NULL")
        await one.close()
        await two.close()
    finally:
        await postgres_server.drop_database(first)
        await postgres_server.drop_database(second)
    assert seen is False


async def test_a_dropped_database_is_gone_even_with_a_connection_left_open(
    postgres_server: PostgresServer,
) -> None:
    name = await postgres_server.create_database()
    forgotten = await asyncpg.connect(postgres_server.url(name))
    await postgres_server.drop_database(name)
    admin = await asyncpg.connect(postgres_server.url("postgres"))
    try:
        left = await admin.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", name)
    finally:
        await admin.close()
        forgotten.terminate()
    assert left == 0


async def test_the_server_listens_on_no_tcp_port(postgres_database: str) -> None:
    connection = await asyncpg.connect(postgres_database)
    try:
        assert await connection.fetchval("SHOW listen_addresses") == ""
    finally:
        await connection.close()


def test_the_server_never_runs_as_root(postgres_server: PostgresServer) -> None:
    assert postgres_server.data_dir.stat().st_uid != 0


def test_a_machine_without_postgresql_is_told_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(PostgresUnavailable) as raised:
        find_bin_dir(path=str(tmp_path), distribution_dirs=str(tmp_path / "*" / "bin"))
    assert "apt-get install postgresql" in str(raised.value)


def test_the_newest_distribution_version_is_chosen(tmp_path: Path) -> None:
    for version in ("9.6", "15", "13"):
        bin_dir = tmp_path / version / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "initdb").touch()
    found = find_bin_dir(
        path=str(tmp_path / "nowhere"), distribution_dirs=str(tmp_path / "*" / "bin")
    )
    assert found == tmp_path / "15" / "bin"


CHILD_WRITES = """
import asyncio, sys
import asyncpg

async def main():
    connection = await asyncpg.connect(sys.argv[1])
    await connection.execute("INSERT INTO notes VALUES ('from the child')")
    await connection.close()

asyncio.run(main())
"""


async def test_a_child_process_reaches_the_server_through_the_database_url(
    postgres_database: str,
) -> None:
    """What a ``companion run`` worker gets as its ``[storage] database_url``."""
    connection = await asyncpg.connect(postgres_database)
    try:
        await connection.execute("CREATE TABLE notes (text TEXT)")
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD_WRITES, postgres_database
        )
        assert await asyncio.wait_for(child.wait(), 60) == 0
        assert await connection.fetchval("SELECT text FROM notes") == "from the child"
    finally:
        await connection.close()


async def test_a_restart_cuts_connections_and_keeps_the_data(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    before = await asyncpg.connect(postgres_database)
    await before.execute("CREATE TABLE notes (text TEXT)")
    await before.execute("INSERT INTO notes VALUES ('kept')")
    await asyncio.to_thread(postgres_server.restart)
    with pytest.raises((asyncpg.PostgresConnectionError, asyncpg.InterfaceError, OSError)):
        await before.fetchval("SELECT 1")
    before.terminate()
    after = await asyncpg.connect(postgres_database)
    try:
        assert await after.fetchval("SELECT text FROM notes") == "kept"
    finally:
        await after.close()


async def test_a_stopped_server_refuses_connections_until_it_starts_again(
    postgres_server: PostgresServer, postgres_database: str
) -> None:
    await asyncio.to_thread(postgres_server.stop_serving)
    try:
        with pytest.raises(OSError):
            await asyncpg.connect(postgres_database)
    finally:
        await asyncio.to_thread(postgres_server.start_serving)
    connection = await asyncpg.connect(postgres_database)
    try:
        assert await connection.fetchval("SELECT 1") == 1
    finally:
        await connection.close()


def test_a_server_whose_test_run_was_killed_is_stopped_by_the_next_run() -> None:
    """A test run killed with SIGKILL leaves its server running; the next run's start reaps
    it (and leaves the servers of runs still alive alone)."""
    temp_dir = Path(tempfile.mkdtemp(prefix="reap-"))
    temp_dir.chmod(0o755)  # the server's own account must reach its directory inside
    child = subprocess.Popen(
        [sys.executable, "-c", START_AND_WAIT],
        env={**os.environ, "TMPDIR": str(temp_dir)},
        stdin=subprocess.PIPE,  # it waits on its stdin until it is killed
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parent.parent,
    )
    try:
        assert child.stdout is not None
        directory = Path(child.stdout.readline().strip())
        postmaster = int((directory / "data" / "postmaster.pid").read_text().split()[0])
        left_alone = reap_orphans(str(temp_dir))  # its owner still runs
        child.kill()
        child.wait()
        was_running = process_alive(postmaster)
        reaped = reap_orphans(str(temp_dir))
    finally:
        child.kill()
        child.wait()
        for left in temp_dir.glob("companion-pg-*"):  # the reaping failed: stop it here
            with contextlib.suppress(PostgresUnavailable):
                PostgresServer(find_bin_dir(), left, server_account()).stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert left_alone == []
    assert was_running, "the server died with its test run: nothing to reap"
    assert reaped == [directory]
    assert not directory.exists()
    assert gone(postmaster), "the orphaned server still runs"


def gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` ends within ``timeout`` (``pg_ctl stop --wait`` returns once the
    server's pid file is gone, a moment before its process is)."""
    deadline = time.monotonic() + timeout
    while process_alive(pid) and not _zombie(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return False


START_AND_WAIT = """
import sys
from tests.postgres_server import PostgresServer
print(PostgresServer.start().directory, flush=True)
sys.stdin.read()
"""
