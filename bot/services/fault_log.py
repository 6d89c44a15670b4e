"""How a loop that retries logs its faults: once per episode, not once per attempt.

A loop that does store or endpoint work on a timer or per message (the heartbeat, the
dispatcher, delivery retries, the embedder, the scheduler's jobs) meets the same fault on
every attempt while a database or an endpoint is away: a PostgreSQL restart of 20 s wrote
one traceback per attempt, 168 of them. A :class:`FaultLog` per loop logs the first failure
of an episode with its traceback, the ones after it at DEBUG only, and one line when the loop
next succeeds: "X recovered after N failures over T s". What the loop does about the fault
(pause, retry, step down) stays the loop's business.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class FaultLog:
    """The faults of one loop (``what``, as the log names it: "the heartbeat")."""

    def __init__(
        self, what: str, logger: logging.Logger, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what = what
        self.logger = logger
        self.clock = clock
        self.failures = 0
        """Attempts failed in a row (0: the last one succeeded)."""
        self._since = 0.0

    def failed(self, exc: BaseException, *, expected: bool = False, about: str = "") -> None:
        """An attempt failed with ``exc`` (on ``about``: a queue key, a job). The first
        failure of an episode is logged: an error with the traceback, or for an ``expected``
        fault (an outage the loop knows, such as an endpoint that is down) a warning with its
        cause; the rest at DEBUG."""
        self.failures += 1
        what = f"{self.what} failed ({about})" if about else f"{self.what} failed"
        if self.failures > 1:
            self.logger.debug("%s again (%d in a row): %s", what, self.failures, exc)
            return
        self._since = self.clock()
        if expected:
            self.logger.warning("%s: %s; trying again", what, exc)
        else:
            self.logger.error("%s; trying again", what, exc_info=exc)

    def succeeded(self) -> None:
        """An attempt succeeded: after failures, one line ends their episode."""
        if self.failures == 0:
            return
        self.logger.info(
            "%s recovered after %d failure%s over %.0f s",
            self.what,
            self.failures,
            "" if self.failures == 1 else "s",
            self.clock() - self._since,
        )
        self.failures = 0
