"""Opening a PostgreSQL database with asyncpg (one connection, or a pool of them): its errors
leave as the store's own, and the database URL is named in messages without its password (it
is a secret like any token)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bot.store.errors import StoreError
from bot.store.postgres.migrations import schema_version

_PASSWORD_OPTION = re.compile(r"(?i)((?:^|&)password=)[^&]*")
CONNECT_TIMEOUT_SECONDS = 10.0
POOL_SIZE = 10
"""Connections one gateway process holds: enough for its concurrent turns' short statements."""
STATEMENT_TIMEOUT_SECONDS = 30.0
"""How long one statement on the pool may take before it is cancelled (on the server too) and
the caller gets :class:`StoreUnavailable`: a hung server, a lock never released or a network
gone silent must not stall a turn for ever. The gateway's statements take milliseconds (a
search a few dozen at worst) and a turn's lease is 10 s by default, so 30 s is never reached
by a healthy database however loaded, yet a stalled turn gives up and is retried within the
time a user still waits for an answer. Not a setting: no deployment should need statements
that wait longer. Schema changes run on a connection of their own without it, and the
maintenance after forgetting passes its own."""


def redacted(url: str) -> str:
    """The URL as it may be shown: a password in it (before the host, or a ``password=``
    option) replaced by ``***``. Reads the URL as text, so one that does not parse (a port
    that is no number) is still shown without its password."""
    parts = urlsplit(url)
    netloc = parts.netloc
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = _PASSWORD_OPTION.sub(r"\1***", parts.query)
    return urlunsplit(parts._replace(netloc=netloc, query=query))


OPEN_ERRORS = (
    OSError,
    TimeoutError,
    ValueError,  # a URL asyncpg cannot read (a port that is no number, an unknown option)
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)


def cannot_open(url: str, exc: BaseException) -> StoreError:
    """One line naming the URL (without its password), the reason and what to check."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return StoreError(
        f"cannot open the database {redacted(url)}: {reason} (check storage.database_url"
        " and that the PostgreSQL server runs and lets this user in)"
    )


async def connect(url: str) -> asyncpg.Connection:
    """A connection to the database at ``url`` (``postgresql://user:password@host/name``)."""
    try:
        return await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_SECONDS)
    except OPEN_ERRORS as exc:
        raise cannot_open(url, exc) from exc


async def create_pool(
    url: str, statement_timeout_seconds: float = STATEMENT_TIMEOUT_SECONDS
) -> asyncpg.Pool:
    """A pool of connections to the database at ``url``, one of them opened now, whose
    statements are cancelled after ``statement_timeout_seconds``. A URL that does not parse,
    a server that cannot be reached or refuses us is one line naming the URL (without its
    password) and what to check.

    The pool keeps no floor of connections (``min_size=0``): asyncpg would restore a floor
    in the background during an outage and log a traceback on each of its retries, while
    the gateway's own loops already log the outage once (``bot/services/fault_log.py``)."""
    try:
        pool = await asyncpg.create_pool(
            url,
            init_size=1,
            min_size=0,
            max_size=POOL_SIZE,
            timeout=CONNECT_TIMEOUT_SECONDS,
            command_timeout=statement_timeout_seconds,
        )
    except OPEN_ERRORS as exc:
        raise cannot_open(url, exc) from exc
    assert pool is not None  # None only from a pool made without awaiting it
    return pool


async def database_schema(url: str) -> tuple[int, str]:
    """(schema steps applied, server version) of the database at ``url``, read without
    changing anything (``companion doctor``)."""
    db = await connect(url)
    try:
        version = await schema_version(db)
        server = str(await db.fetchval("SHOW server_version"))
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot read the database {redacted(url)}: {exc}") from exc
    finally:
        await db.close()
    return version, server
