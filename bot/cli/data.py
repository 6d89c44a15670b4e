"""What every ``companion`` command may need: :class:`CLIError` for a problem the owner can fix,
the partner catalog where the gateway keeps it (directories under the data directory, or rows
of the database: ``partners/catalog.py``), and the data directory's lock."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from bot.app import DataDirLock
from bot.config.model import Config
from bot.gateway.memory_documents import partner_catalog, rows_configured
from bot.store import Store
from bot.store.opening import open_store
from partners.catalog import PartnerCatalog

T = TypeVar("T")


class CLIError(Exception):
    """A problem the owner can fix; printed without a traceback."""


def load_catalog(config: Config) -> PartnerCatalog:
    """The partners as the gateway keeps them now, to read (a catalog of rows comes back
    with its database closed: write through :func:`with_catalog`)."""
    if not rows_configured(config):
        catalog = PartnerCatalog(config.data_dir / "partners")
        catalog.reload()
        return catalog

    async def loaded(catalog: PartnerCatalog, _: Store | None) -> PartnerCatalog:
        return catalog

    return with_catalog(config, loaded)


Work = Callable[[PartnerCatalog, "Store | None"], Awaitable[T]]


def with_catalog(config: Config, work: Work[T]) -> T:
    """Run ``work`` on the partner catalog, loaded, and with rows the database they are in
    (open meanwhile; None with directories, which need no database)."""

    async def go() -> T:
        if not rows_configured(config):
            catalog = PartnerCatalog(config.data_dir / "partners")
            await catalog.reread()
            return await work(catalog, None)
        store = await open_store(config.database)
        try:
            catalog = partner_catalog(config, store)
            await catalog.refresh()
            return await work(catalog, store)
        finally:
            await store.close()

    return asyncio.run(go())


def lock_data_dir(config: Config) -> DataDirLock:
    """The data directory's lock, taken (a command that writes while no gateway runs)."""
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    return lock
