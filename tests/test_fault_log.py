"""A loop that retries logs its faults once per episode (:mod:`bot.services.fault_log`): the first
failure with its traceback, the ones after it at DEBUG only, and one line with the count and
the time when the loop next succeeds."""

from __future__ import annotations

import logging

import pytest

from bot.services.fault_log import FaultLog

LOGGER = "tests.fault_log"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def failing(message: str = "database away") -> ConnectionError:
    """An exception that was raised (so it has a traceback to log)."""
    try:
        raise ConnectionError(message)
    except ConnectionError as exc:
        return exc


def shown(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What a log at INFO shows."""
    return [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.INFO]


@pytest.fixture
def faults(caplog: pytest.LogCaptureFixture) -> FaultLog:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return FaultLog("the heartbeat", logging.getLogger(LOGGER), clock=Clock())


def test_the_first_failure_is_logged_with_its_traceback(
    faults: FaultLog, caplog: pytest.LogCaptureFixture
) -> None:
    faults.failed(failing())
    [record] = shown(caplog)
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert "the heartbeat failed" in record.getMessage()


def test_further_failures_of_an_episode_are_only_debug(
    faults: FaultLog, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(5):
        faults.failed(failing())
    assert len(shown(caplog)) == 1
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug) == 4 and all(r.exc_info is None for r in debug)


def test_the_recovery_is_one_line_with_the_count_and_the_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    clock = Clock()
    faults = FaultLog("the heartbeat", logging.getLogger(LOGGER), clock=clock)
    for _ in range(3):
        faults.failed(failing())
        clock.now += 6.0
    faults.succeeded()
    recovered = shown(caplog)[-1]
    assert recovered.levelno == logging.INFO
    assert recovered.getMessage() == "the heartbeat recovered after 3 failures over 18 s"


def test_a_success_without_a_failure_logs_nothing(
    faults: FaultLog, caplog: pytest.LogCaptureFixture
) -> None:
    faults.succeeded()
    faults.succeeded()
    assert caplog.records == []


def test_a_new_episode_logs_its_first_failure_again(
    faults: FaultLog, caplog: pytest.LogCaptureFixture
) -> None:
    faults.failed(failing())
    faults.failed(failing())
    faults.succeeded()
    faults.failed(failing("again"))
    errors = [r for r in shown(caplog) if r.levelno == logging.ERROR]
    assert len(errors) == 2 and "again" in errors[1].getMessage()


def test_an_expected_fault_is_one_warning_without_a_traceback(
    faults: FaultLog, caplog: pytest.LogCaptureFixture
) -> None:
    """An outage the loop knows (an endpoint down) needs its cause, not a stack."""
    faults.failed(failing("503"), expected=True)
    faults.failed(failing("503"), expected=True)
    [record] = shown(caplog)
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "503" in record.getMessage()


def test_the_count_of_failures_in_a_row_is_kept(faults: FaultLog) -> None:
    faults.failed(failing())
    faults.failed(failing())
    assert faults.failures == 2
    faults.succeeded()
    assert faults.failures == 0


def test_the_first_failure_names_what_it_was_about(
    faults: FaultLog, caplog: pytest.LogCaptureFixture
) -> None:
    faults.failed(failing(), about="queue test:42")
    faults.failed(failing(), about="queue test:43")
    [first] = shown(caplog)
    assert "the heartbeat failed (queue test:42)" in first.getMessage()
    assert "queue test:43" in caplog.records[-1].getMessage()
