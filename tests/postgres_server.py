"""A throwaway PostgreSQL server for one test session, and a fresh database per test.

The server is the machine's own (the distribution's ``postgresql`` package, which ``make test``
installs when it runs as root on a Debian-like machine). It lives in a temporary directory,
listens on a unix socket there and on no TCP port (so two test runs on one machine never meet,
and nothing but this machine can reach it), trusts its local connections and skips fsync: its
data is thrown away. ``initdb`` refuses to run as root, so a root test run starts the server
as the ``postgres`` user, in a directory that user owns.

A test run that is killed (SIGKILL, a CI timeout) cannot stop its server; the next run does:
each server's directory names the test process that owns it, and :func:`reap_orphans` stops
the servers whose owner is gone before a new one starts.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bot.store.opening import open_store
from bot.workers.worker import process_alive

INSTALL_HINT = (
    "install the PostgreSQL server: the distribution's `postgresql` package"
    " (Debian/Ubuntu: `apt-get install postgresql`, which `make test` runs by itself as root)"
    " or put a directory holding `initdb` and `pg_ctl` on PATH"
)
SERVER_USER = "postgres"
"""Who runs the server when the tests run as root (initdb refuses root)."""
SUPERUSER = "postgres"
"""The database role the server is initialised with; it trusts local connections."""
DISTRIBUTION_BIN_DIRS = "/usr/lib/postgresql/*/bin"
"""Where Debian and Ubuntu keep the server's programs (they are not on PATH there)."""
START_TIMEOUT_SECONDS = 60
DIRECTORY_PREFIX = "companion-pg-"
OWNER_FILE = "owner.pid"
"""In a server's directory: the id of the test process that started it."""


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started on this machine; the message says what to install."""


def find_bin_dir(path: str | None = None, distribution_dirs: str = DISTRIBUTION_BIN_DIRS) -> Path:
    """The directory of ``initdb`` and ``pg_ctl``: PATH first, then the newest version the
    distribution installed."""
    for found in (shutil.which("initdb", path=path), shutil.which("pg_ctl", path=path)):
        if found:
            bin_dir = Path(os.path.realpath(found)).parent
            if (bin_dir / "initdb").exists() and (bin_dir / "pg_ctl").exists():
                return bin_dir
    versions = sorted(
        (Path(d) for d in glob.glob(distribution_dirs) if (Path(d) / "initdb").exists()),
        key=lambda d: _version_key(d.parent.name),
    )
    if versions:
        return versions[-1]
    raise PostgresUnavailable(f"no PostgreSQL server on this machine: {INSTALL_HINT}")


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def server_account() -> pwd.struct_passwd | None:
    """The account the server runs as: ``postgres`` for a root test run, None (this user)
    otherwise."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"the tests run as root and initdb refuses root, but there is no {SERVER_USER!r}"
            f" user to run it as: {INSTALL_HINT} (the package creates that user)"
        ) from None


@dataclass
class PostgresServer:
    """One running server in ``directory``; :meth:`stop` ends it and removes its files."""

    bin_dir: Path
    directory: Path
    account: pwd.struct_passwd | None
    _template: str | None = None

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def socket_dir(self) -> Path:
        return self.directory

    @classmethod
    def start(cls) -> PostgresServer:
        bin_dir = find_bin_dir()
        account = server_account()
        reap_orphans()
        directory = Path(tempfile.mkdtemp(prefix=DIRECTORY_PREFIX))
        (directory / OWNER_FILE).write_text(str(os.getpid()))
        if account is not None:
            os.chown(directory, account.pw_uid, account.pw_gid)
        server = cls(bin_dir, directory, account)
        try:
            server._run(
                "initdb",
                "--pgdata",
                str(server.data_dir),
                "--username",
                SUPERUSER,
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            )
            server.start_serving()
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return server

    def start_serving(self) -> None:
        """Start the server on its existing data directory (after :meth:`stop_serving`)."""
        self._run(
            "pg_ctl",
            "start",
            "--wait",
            f"--timeout={START_TIMEOUT_SECONDS}",
            "--pgdata",
            str(self.data_dir),
            "--log",
            str(self.directory / "server.log"),
            "-o",
            self._options(),
        )

    def stop_serving(self) -> None:
        """Stop the server as an operator's ``pg_ctl stop`` does (fast mode: open connections
        are cut, nothing is lost); its data stays for :meth:`start_serving`."""
        self._run("pg_ctl", "stop", "--wait", "--mode", "fast", "--pgdata", str(self.data_dir))

    def restart(self) -> None:
        """``pg_ctl restart``: every connection is cut, and the server is back when this
        returns. Gateways connected to it must find their way back by themselves."""
        self._run(
            "pg_ctl",
            "restart",
            "--wait",
            f"--timeout={START_TIMEOUT_SECONDS}",
            "--mode",
            "fast",
            "--pgdata",
            str(self.data_dir),
            "--log",
            str(self.directory / "server.log"),
            "-o",
            self._options(),
        )

    def _options(self) -> str:
        # no TCP port: the socket in our own directory is the only way in; fsync off because
        # the data is thrown away at the end
        return (
            f"-c listen_addresses='' -k {self.socket_dir} -c fsync=off"
            " -c synchronous_commit=off -c full_page_writes=off"
        )

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if self.account is not None:
            command = ["runuser", "-u", self.account.pw_name, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.directory / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresUnavailable(
                f"{program} failed ({done.returncode}): {done.stderr.strip()}\n{tail}"
            )

    def stop(self) -> None:
        try:
            self._run(
                "pg_ctl", "stop", "--wait", "--mode", "immediate", "--pgdata", str(self.data_dir)
            )
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def url(self, database: str) -> str:
        """A ``postgresql://`` URL of one database on this server (over its socket): what a
        test's own connections use and what a ``companion run`` child gets as its
        ``[storage] database_url`` (it runs as the same user, so the socket is open to it)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.socket_dir}"

    async def create_database(self, template: str | None = None) -> str:
        """A new database, empty or a copy of ``template``; its name."""
        name = f"test_{uuid.uuid4().hex[:16]}"
        copy = f' TEMPLATE "{template}"' if template else ""
        await self._admin(f'CREATE DATABASE "{name}"{copy}')
        return name

    async def migrated_template(self) -> str:
        """A database at the current schema, made once per server: a store test's database
        is copied from it (``CREATE DATABASE … TEMPLATE``) instead of migrating again."""
        if self._template is None:
            name = await self.create_database()
            store = await open_store(self.url(name))
            await store.close()
            self._template = name
        return self._template

    async def drop_database(self, name: str) -> None:
        # FORCE: a test that failed may have left a connection open
        await self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def _admin(self, sql: str) -> None:
        connection = await asyncpg.connect(self.url("postgres"))
        try:
            await connection.execute(sql)
        finally:
            await connection.close()


def reap_orphans(temp_dir: str | None = None) -> list[Path]:
    """Stop the servers of test runs that died without stopping them, and remove their
    directories; the directories reaped. A directory without an owner file is being set up
    by a run that is starting right now, and is left alone."""
    reaped = []
    for found in glob.glob(os.path.join(temp_dir or tempfile.gettempdir(), DIRECTORY_PREFIX + "*")):
        directory = Path(found)
        try:
            owner = int((directory / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        if process_alive(owner):
            continue
        orphan = PostgresServer(find_bin_dir(), directory, server_account())
        if (orphan.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(PostgresUnavailable):  # already down: only files remain
                orphan._run(
                    "pg_ctl",
                    "stop",
                    "--wait",
                    "--mode",
                    "immediate",
                    "--pgdata",
                    str(orphan.data_dir),
                )
        shutil.rmtree(directory, ignore_errors=True)
        reaped.append(directory)
    return reaped

    return True
