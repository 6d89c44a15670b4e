"""Opening a PostgreSQL database with asyncpg (one connection, or a pool of them): its errors
leave as the store's own, and the database URL is named in messages without its password (it
is a secret like any token)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bot.store.errors import StoreError

CONNECT_TIMEOUT_SECONDS = 10.0
POOL_SIZE = 10
"""Connections one gateway process holds: enough for its concurrent turns' short statements."""


def redacted(url: str) -> str:
    """The URL as it may be shown: the password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


async def connect(url: str) -> asyncpg.Connection:
    """A connection to the database at ``url`` (``postgresql://user:password@host/name``)."""
    try:
        return await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_SECONDS)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot open the database {redacted(url)}: {exc}") from exc


async def create_pool(url: str) -> asyncpg.Pool:
    """A pool of connections to the database at ``url``, one of them opened now."""
    try:
        pool = await asyncpg.create_pool(
            url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT_SECONDS
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise StoreError(f"cannot open the database {redacted(url)}: {exc}") from exc
    assert pool is not None  # None only from a pool made without awaiting it
    return pool
