"""The machine's time zone (the ``/etc/localtime`` link), for an owner who named none.

Every turn books its tokens on the owner's day, so the zone is asked for on every turn;
resolving the link each time was a measurable share of a turn. It is read again after
MACHINE_ZONE_SECONDS, so a change of the machine's zone still counts within a minute.
"""

from __future__ import annotations

import time
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MACHINE_ZONE_SECONDS = 60.0
LOCALTIME = Path("/etc/localtime")

clock = time.monotonic
_read_at: float | None = None
_zone = ZoneInfo("UTC")


def machine_timezone() -> ZoneInfo:
    """The machine's zone, else UTC; the link is read at most once a minute."""
    global _read_at, _zone
    now = clock()
    if _read_at is None or now - _read_at >= MACHINE_ZONE_SECONDS:
        _zone, _read_at = read_machine_timezone(), now
    return _zone


def read_machine_timezone() -> ZoneInfo:
    try:
        target = str(LOCALTIME.resolve())
        if "zoneinfo/" in target:
            return ZoneInfo(target.split("zoneinfo/", 1)[1])
    except (OSError, ZoneInfoNotFoundError, ValueError):
        pass
    return ZoneInfo("UTC")
