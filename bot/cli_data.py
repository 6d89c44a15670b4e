"""What every ``companion`` command may need: :class:`CLIError` for a problem the owner can fix,
the partner catalog as the data directory holds it, and the data directory's lock."""

from __future__ import annotations

from bot.app import DataDirLock
from bot.config import Config
from partners.catalog import PartnerCatalog


class CLIError(Exception):
    """A problem the owner can fix; printed without a traceback."""


def load_catalog(config: Config) -> PartnerCatalog:
    """The partners as the data directory holds them now."""
    catalog = PartnerCatalog(config.data_dir / "partners")
    catalog.reload()
    return catalog


def lock_data_dir(config: Config) -> DataDirLock:
    """The data directory's lock, taken (a command that writes while no gateway runs)."""
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    return lock
