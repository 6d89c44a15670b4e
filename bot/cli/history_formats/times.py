"""When an imported message was said, from any of the forms the source apps write: epoch
seconds or milliseconds (a number or a string of digits), ISO 8601, and SillyTavern's own forms
("June 5, 2024 3:04pm", "2024-6-5 @14h 56m 50s 682ms", "2024-7-12@01h31m37s"). A time without a
zone is UTC. A time no calendar can hold (before 1970, past 9999) is refused: stored, it would
break every page and search that shows it."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
"""The last second a date can show; a later time is not a time."""
MILLISECONDS_FROM = 100_000_000_000
"""A number this large is milliseconds: as seconds it would be past the year 5000, while as
milliseconds it is any day after March 1973."""
MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january", "february", "march", "april", "may", "june", "july", "august",
            "september", "october", "november", "december",
        ),
        start=1,
    )
}  # fmt: skip
MERIDIEM = re.compile(r"([A-Za-z]+)\s(\d{1,2}),\s(\d{4})\s(\d{1,2}):(\d{1,2})\s?(am|pm)", re.I)
HUMANIZED = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})\s?@(\d{1,2})h\s?(\d{1,2})m\s?(\d{1,2})s(?:\s?(\d{1,3})ms)?"
)
FORMS = "epoch seconds or milliseconds, ISO 8601 or a date like 'June 5, 2024 3:04pm'"


class BadTime(ValueError):
    """A time that is not one of the forms read here, or not a possible time."""


def parse_time(value: Any) -> float:
    """Epoch seconds of ``value``; :class:`BadTime` saying what was wrong."""
    if isinstance(value, bool) or value is None:
        raise BadTime(f"time {value!r} is not {FORMS}")
    if isinstance(value, int | float):
        return _epoch(float(value), value)
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return _epoch(float(text), value)
    return _checked(_calendar(text), value)


def _epoch(number: float, value: Any) -> float:
    if not math.isfinite(number):
        raise BadTime(f"time {value!r} is not a number of seconds")
    return _checked(number / 1000 if abs(number) >= MILLISECONDS_FROM else number, value)


def _checked(seconds: float, value: Any) -> float:
    if not 0 <= seconds <= LATEST:
        raise BadTime(f"time {value!r} is not a possible time (before 1970 or after 9999)")
    return seconds


def _calendar(text: str) -> float:
    """Epoch seconds of a written date: SillyTavern's forms first, then ISO 8601."""
    match = MERIDIEM.fullmatch(text)
    if match and match.group(1).lower() in MONTHS:
        month, day, year, hour, minute, half = match.groups()
        hour24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
        moment = (int(year), MONTHS[month.lower()], int(day), hour24, int(minute), 0, 0)
    elif match := HUMANIZED.fullmatch(text):
        year, month, day, hour, minute, second, millis = match.groups()
        moment = (int(year), int(month), int(day), int(hour), int(minute), int(second),
                  int(millis or 0) * 1000)  # fmt: skip
    else:
        return _iso(text)
    try:
        return datetime(*moment, tzinfo=UTC).timestamp()
    except ValueError as exc:
        raise BadTime(f"time {text!r} is not a possible date ({exc})") from None


def _iso(text: str) -> float:
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadTime(f"time {text!r} is not {FORMS}") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
