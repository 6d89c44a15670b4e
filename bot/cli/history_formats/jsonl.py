"""The project's own history format: one JSON object a line with ``session``, ``user``,
``role``, ``text`` and ``time`` (``companion import --help`` lists the fields). Read line by
line, so a file of any size is never held whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from bot.cli.history_formats.messages import BadHistory, Choices, Imported, flat_text, json_object
from bot.cli.history_formats.times import BadTime, parse_time

ROLES = ("user", "assistant")
REQUIRED = ("session", "user", "role", "text", "time")


def read(path: Path, _choices: Choices) -> Iterator[Imported]:
    """Every line's message; the file names its own users, so nothing is chosen."""
    with path.open(encoding="utf-8-sig") as file:
        records = ((number, line) for number, line in enumerate(file, start=1) if line.strip())
        for index, (number, line) in enumerate(records):
            yield parse_line(number, index, line)


def parse_line(number: int, index: int, line: str) -> Imported:
    """The message on line ``number``, the ``index``-th record of its file (which names it
    when the record has no ``id``)."""
    record = json_object(number, line)
    for key in REQUIRED:
        if key not in record or record[key] in (None, ""):
            raise BadHistory(f"line {number}: missing '{key}'")
    if record["role"] not in ROLES:
        raise BadHistory(f"line {number}: role must be user or assistant, not {record['role']!r}")
    try:
        text = flat_text(record["text"])
        time = parse_time(record["time"])
    except (BadTime, ValueError) as exc:
        raise BadHistory(f"line {number}: {exc}") from None
    if not text.strip():
        raise BadHistory(f"line {number}: missing 'text'")
    session = str(record["session"])
    return Imported(
        conversation=session,
        title=str(record.get("title") or ""),
        user=str(record["user"]),
        role=record["role"],
        text=text,
        time=time,
        ident=str(record.get("id") or f"{session}:{index}"),
    )
