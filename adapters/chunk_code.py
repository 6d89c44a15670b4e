"""Code blocks too long for one message, cut between lines (a line longer than a message
between characters), each piece a closed block with the same language."""

from __future__ import annotations

from collections.abc import Callable

from adapters.chunk_room import Room
from bot.text.utf16 import utf16_len


def fenced(fence: str, info: str, code: str) -> str:
    return f"{fence}{info}\n{code}\n{fence}"


def cut_code(fence: str, info: str, body: str, room: Room) -> list[str]:
    """A code block cut between lines (a line longer than a message between characters),
    each piece a closed block with the same language. Code is shown as it is, so a block's
    size is its fences and wrapping (measured once, for one line and for two) plus its
    text: a long block is not measured again line after line."""
    if not room.fits(fenced(fence, info, "x")):
        info = ""  # an absurdly long language is not worth a message
    one_line = room.measure(room.wrap(fenced(fence, info, "x"))) - 1
    per_line = room.measure(room.wrap(fenced(fence, info, "x\nx"))) - one_line - 2
    room_for_text = room.limit - one_line
    lines: list[str] = []
    for line in body.removesuffix("\n").split("\n"):
        lines.extend(cut_line(line, lambda part: utf16_len(part) <= room_for_text))
    groups: list[list[str]] = [[]]
    used = 0
    for line in lines:
        extra = utf16_len(line) + (per_line if groups[-1] else 0)
        if groups[-1] and used + extra > room_for_text:
            groups.append([])
            used, extra = 0, utf16_len(line)
        groups[-1].append(line)
        used += extra
    return [fenced(fence, info, "\n".join(group)) for group in groups]


def cut_line(line: str, fits: Callable[[str], bool]) -> list[str]:
    """A line too long for a message, cut between characters (at least one per part)."""
    parts: list[str] = []
    while not fits(line) and len(line) > 1:
        low, high = 1, len(line) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if fits(line[:middle]):
                low = middle
            else:
                high = middle - 1
        parts.append(line[:low])
        line = line[low:]
    return [*parts, line]
