"""Long command answers in pages, never one giant message.

A page is about :data:`PAGE_CHARS` characters, cut at line boundaries. Page 1 carries a "next"
button (a :class:`~bot.events.Choice`: an inline button on Telegram, plain text in the console)
whose command asks for page 2 with ``--page 2``, and so on; the text also names that command,
for platforms without buttons.
"""

from __future__ import annotations

from bot.commands.types import CommandReply
from bot.events import Choice

PAGE_CHARS = 3000
PAGE_FLAG = "--page"


class PageError(ValueError):
    """A page number that is not a positive whole number."""


def pop_page(args: list[str]) -> int:
    """Remove ``--page N`` from ``args`` and return N (1 without the flag)."""
    if PAGE_FLAG not in args:
        return 1
    at = args.index(PAGE_FLAG)
    value = args[at + 1] if at + 1 < len(args) else ""
    del args[at : at + 2]
    if not value.isdigit() or int(value) < 1:
        raise PageError(f"{PAGE_FLAG} takes a page number like 2, not {value!r}")
    return int(value)


def split_pages(text: str, page_chars: int = PAGE_CHARS) -> list[str]:
    """Pages of at most ``page_chars``, cut between lines (a longer line is cut inside)."""
    pages: list[str] = []
    current: list[str] = []
    size = 0
    for line in text.split("\n"):
        while len(line) > page_chars:
            if current:
                pages.append("\n".join(current))
                current, size = [], 0
            pages.append(line[:page_chars])
            line = line[page_chars:]
        if current and size + len(line) + 1 > page_chars:
            pages.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        pages.append("\n".join(current))
    return [page for page in pages if page.strip()] or [""]


def paged(text: str, command: str, page: int, page_chars: int = PAGE_CHARS) -> CommandReply:
    """Page ``page`` of ``text``; ``command`` is what shows the whole text from page 1."""
    pages = split_pages(text, page_chars)
    if page > len(pages):
        return CommandReply(f"There are only {len(pages)} page(s); send {command} for page 1.")
    body = pages[page - 1]
    if len(pages) == 1:
        return CommandReply(body)
    footer = f"\n\n(page {page} of {len(pages)})"
    if page == len(pages):
        return CommandReply(body + footer)
    following = f"{command} {PAGE_FLAG} {page + 1}"
    return CommandReply(body + footer[:-1] + f" — next: {following})", (Choice("next", following),))
