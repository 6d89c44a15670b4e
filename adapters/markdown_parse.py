"""The model's Markdown, parsed once by markdown-it-py for every channel that shows or cuts it.

CommonMark with GitHub's tables and strikethrough, and three departures chosen for chat:

* Raw HTML is not HTML: ``<b>`` is the four characters a user sees (Telegram would refuse most
  tags, Discord shows them as text anyway).
* No indented code blocks: a reply indented for a poem or a nested thought is text, and every
  chat client writes code in fences.
* Whitespace is kept. CommonMark drops the spaces that start a line inside a paragraph and the
  ones that end it; a chat message shows them, and text made literal for the owner
  (``bot/text/literal.py``) must come out exactly as it went in. So the newline rule keeps them as
  text, and :func:`top_level_blocks` hands back each block's place in the source, from which a
  renderer restores the blank lines between blocks and the edges of a paragraph.

Line breaks are not normalised either: a ``\\r`` is a character like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token


def _newline_keeping_spaces(state: StateInline, silent: bool) -> bool:
    """markdown-it's newline rule (two spaces before it make a hard break), without dropping
    the spaces around the break: they stay in the text."""
    if state.src[state.pos] != "\n":
        return False
    if not silent:
        hard = state.pending.endswith("  ")
        state.push("hardbreak" if hard else "softbreak", "br", 0)
    state.pos += 1
    return True


def _build() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False})
    parser.enable(["table", "strikethrough"])
    parser.disable(["code", "normalize"])
    parser.inline.ruler.at("newline", _newline_keeping_spaces)
    return parser


PARSER = _build()
_NEWLINE = re.compile("\n")


def parse(markdown: str) -> list[Token]:
    """The block tokens of ``markdown`` (NUL characters removed: nothing shows them)."""
    return PARSER.parse(markdown.replace("\x00", ""))


@dataclass(frozen=True)
class Block:
    """One top-level block: its tokens (opening to closing) and its span in the source."""

    tokens: list[Token]
    start: int
    end: int
    """Source offsets; ``end`` excludes the block's last line break and trailing blank lines."""

    @property
    def kind(self) -> str:
        return self.tokens[0].type.removesuffix("_open")


def top_level_blocks(source: str, tokens: list[Token]) -> list[Block]:
    """Group block tokens by top-level block, each with where it sits in ``source``."""
    line_starts = _line_starts(source)
    found: list[Block] = []
    index = 0
    while index < len(tokens):
        first = tokens[index]
        last = index
        if first.nesting == 1:
            depth = 0
            for last in range(index, len(tokens)):
                depth += tokens[last].nesting
                if depth == 0:
                    break
        if first.map is not None:
            start, end = _span(source, line_starts, first.map)
            found.append(Block(tokens[index : last + 1], start, end))
        index = last + 1
    return found


def _span(source: str, line_starts: list[int], lines: list[int]) -> tuple[int, int]:
    first, after = lines
    start = line_starts[first] if first < len(line_starts) else len(source)
    end = line_starts[after] - 1 if after < len(line_starts) else len(source)
    while end > start and source[start:end].rsplit("\n", 1)[-1].strip(" \t") == "":
        cut = source.rfind("\n", start, end)
        if cut < 0:
            break
        end = cut
    return start, max(start, end)


def _line_starts(source: str) -> list[int]:
    return [0, *(match.end() for match in _NEWLINE.finditer(source))]
