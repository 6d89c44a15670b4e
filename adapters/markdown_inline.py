"""A paragraph's inline Markdown as styled text, cut into pieces that each stand on their own.

A paragraph too long for one message must be cut, and a cut may fall inside bold, a link or a
code span. Cutting the Markdown source there would leave ``**`` open in one message and
stray in the next. So the paragraph's inline tokens become :class:`Span` s — runs of visible
text, each with the formatting (:class:`Mark` s) around it — and each piece is written back as
Markdown by :func:`to_markdown`, which closes every mark at the end of the piece and opens it
again at the start of the next. Visible text is never lost: only the whitespace a cut falls on.

Writing text back escapes what could start Markdown anew in its new place (``*``, ``[``, a
``-`` or ``1.`` at the start of a line...), so a piece parses to exactly the text and
formatting it came from.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from markdown_it.token import Token

MARK_KINDS = frozenset({"strong", "em", "s", "link"})
"""Token kinds (``strong_open``...) that open and close a mark around text."""


@dataclass(frozen=True)
class Mark:
    """Formatting around text: ``strong``, ``em``, ``s``, ``link`` (with its ``href``) or
    ``code``; ``markup`` is how the source wrote it (``**`` or ``__``, ``*`` or ``_``)."""

    kind: str
    markup: str = ""
    href: str = ""


@dataclass(frozen=True)
class Span:
    """Visible text and the marks around it, outermost first."""

    text: str
    marks: tuple[Mark, ...]


def spans_of(children: Iterable[Token]) -> list[Span]:
    """An inline token list as spans. A mark inside one of its own kind (italic in italic)
    adds nothing a reader sees and is dropped; spans with the same marks are merged."""
    spans: list[Span] = []
    stack: list[Mark | None] = []  # None: a mark of a kind already open

    def current() -> tuple[Mark, ...]:
        return tuple(mark for mark in stack if mark is not None)

    def add(text: str, marks: tuple[Mark, ...]) -> None:
        if not text:
            return
        if spans and spans[-1].marks == marks:
            spans[-1] = Span(spans[-1].text + text, marks)
        else:
            spans.append(Span(text, marks))

    def push(mark: Mark) -> None:
        stack.append(None if any(m.kind == mark.kind for m in current()) else mark)

    for token in children:
        kind = token.type.removesuffix("_open").removesuffix("_close")
        if token.type in ("text", "text_special", "html_inline"):
            add(token.content, current())
        elif token.type in ("softbreak", "hardbreak"):
            add("\n", current())
        elif token.type == "code_inline":
            add(token.content, (*current(), Mark("code", token.markup)))
        elif kind in MARK_KINDS and token.nesting == 1:
            push(Mark(kind, token.markup, str(token.attrGet("href") or "")))
        elif kind in MARK_KINDS and token.nesting == -1:
            stack.pop()
        elif token.type == "image":
            push(Mark("link", "", str(token.attrGet("src") or "")))
            for span in spans_of(token.children or []):
                add(span.text, (*current(), *span.marks))
            stack.pop()
        else:
            add(token.content, current())
    return spans


# ---- back to Markdown --------------------------------------------------------------------

_ESCAPED = re.compile(r"[\\`*~\[\]<&|]|(?<![^\W_])_|_(?![^\W_])")
"""Always escaped: what opens code, emphasis, strikethrough, links, autolinks, references
and table cells; ``_`` too, unless inside a word (where it cannot open emphasis)."""
_LINE_START = re.compile(r"([ \t]*)([-+=#>]|\d+[.)])")


def escape_text(text: str, at_line_start: bool) -> str:
    """``text`` as Markdown that shows exactly these characters wherever it is placed."""
    out: list[str] = []
    for number, line in enumerate(text.split("\n")):
        escaped = _ESCAPED.sub(lambda match: "\\" + match.group(0), line)
        if number > 0 or at_line_start:
            escaped = _escape_line_start(escaped)
        out.append(escaped)
    return "\n".join(out)


def _escape_line_start(line: str) -> str:
    match = _LINE_START.match(line)
    if match is None:
        return line
    marker = match.group(2)
    escaped = marker[:-1] + "\\" + marker[-1] if marker[0].isdigit() else "\\" + marker
    return match.group(1) + escaped + line[match.end() :]


def _opening(mark: Mark, code: str) -> str:
    if mark.kind == "link":
        return "["
    if mark.kind == "code":
        return _fence(code) + _code_padding(code)
    return mark.markup or {"strong": "**", "em": "*", "s": "~~"}[mark.kind]


def _closing(mark: Mark, code: str) -> str:
    if mark.kind == "link":
        return f"](<{mark.href}>)"
    if mark.kind == "code":
        return _code_padding(code) + _fence(code)
    return _opening(mark, code)


def _fence(code: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    return "`" * (longest + 1)


def _code_padding(code: str) -> str:
    """CommonMark strips one space from each end of a code span that has one at both ends,
    and a backtick at an end would join the fence: pad with a space in those cases."""
    if code.startswith("`") or code.endswith("`"):
        return " "
    if code.startswith(" ") and code.endswith(" ") and code.strip(" "):
        return " "
    return ""


def to_markdown(spans: list[Span]) -> str:
    """Spans written back as Markdown: every mark opened before its text and closed after it,
    all of them closed at the end. Marks two neighbouring spans share stay open between them
    (a code span never does: each is its own)."""
    out: list[str] = []
    open_marks: tuple[Mark, ...] = ()
    open_code = ""
    at_line_start = True
    for span in spans:
        shared = 0
        while (
            shared < min(len(open_marks), len(span.marks))
            and open_marks[shared] == span.marks[shared]
            and open_marks[shared].kind != "code"
        ):
            shared += 1
        out.extend(_closing(mark, open_code) for mark in reversed(open_marks[shared:]))
        code = span.text if span.marks and span.marks[-1].kind == "code" else ""
        opened = [_opening(mark, code) for mark in span.marks[shared:]]
        if opened and opened[0] == "[" and out and out[-1].endswith("!"):
            out[-1] = out[-1][:-1] + "\\!"  # "![" would make the link an image
        out.extend(opened)
        if code:
            out.append(code)
            at_line_start = False
        else:
            out.append(escape_text(span.text, at_line_start and not opened))
            at_line_start = span.text.endswith("\n")
        open_marks, open_code = span.marks, code
    out.extend(_closing(mark, open_code) for mark in reversed(open_marks))
    return "".join(out)


# ---- cutting -----------------------------------------------------------------------------

SpansSize = Callable[[list[Span]], int]
"""The size of a piece (the spans it keeps) written as Markdown, as the platform counts it;
never less than the number of characters it shows."""

_SENTENCE_END = frozenset(".!?。！？…")
_SENTENCE_CLOSERS = frozenset("\"')]»”’")
_NO_SPACE_SENTENCE_END = frozenset("。！？…")
_JOINERS = frozenset("\u200d\ufe0e\ufe0f")
_LINE, _SENTENCE, _WORD = 3, 2, 1

Cell = tuple[str, tuple[Mark, ...]]


def cut(spans: list[Span], size: SpansSize, limit: int) -> list[str]:
    """Cut a paragraph's spans into Markdown pieces that each fit: at line breaks, then
    sentence ends, then spaces, and between two characters only when a word is longer than a
    message (never inside an emoji sequence). The whitespace a cut falls on is dropped."""
    cells: list[Cell] = [(char, span.marks) for span in spans for char in span.text]
    pieces: list[str] = []
    start = _skip_space(cells, 0)
    while start < len(cells):
        end = _longest_fit(cells, start, size, limit)
        if end < len(cells):
            end = _best_cut(cells, start, end)
        pieces.append(to_markdown(_spans(cells, start, end)))
        start = _skip_space(cells, end)
    return pieces


def _spans(cells: list[Cell], start: int, end: int) -> list[Span]:
    while end > start and cells[end - 1][0].isspace():
        end -= 1  # a mark cannot close after whitespace
    return [
        Span("".join(char for char, _ in run), marks)
        for marks, run in itertools.groupby(cells[start:end], key=lambda cell: cell[1])
    ]


def _skip_space(cells: list[Cell], index: int) -> int:
    while index < len(cells) and cells[index][0].isspace():
        index += 1
    return index


def _longest_fit(cells: list[Cell], start: int, size: SpansSize, limit: int) -> int:
    """The furthest end whose piece fits (at least one character, so cutting moves on). A
    mark whose own Markdown is longer than a message (a link to a huge URL) is dropped from
    the characters that cannot otherwise fit (``cells`` is changed in place): their text
    matters more."""

    def size_to(end: int) -> int:
        return size(_spans(cells, start, end))

    low, low_size = start + 1, size_to(start + 1)
    if low_size > limit:
        if cells[start][1]:
            cells[start:] = [(char, ()) for char, _ in cells[start:]]
            return _longest_fit(cells, start, size, limit)
        return low
    # a piece shows each of its characters: more than ``limit`` of them cannot fit
    high = min(len(cells), start + limit + 1)
    high_size = size_to(high)
    while high_size <= limit and high < len(cells):  # only whitespace at the end was dropped
        low, low_size = high, high_size
        high = min(len(cells), high + limit)
        high_size = size_to(high)
    if high_size <= limit:
        return high
    # sizes grow about evenly with length: guess by proportion, halve when a guess is poor
    guess_by_proportion = True
    while high - low > 1:
        middle = (low + high) // 2
        if guess_by_proportion and high_size > low_size:
            share = (limit - low_size) / (high_size - low_size)
            middle = min(high - 1, max(low + 1, low + int(share * (high - low))))
        guess_by_proportion = not guess_by_proportion
        middle_size = size_to(middle)
        if middle_size <= limit:
            low, low_size = middle, middle_size
        else:
            high, high_size = middle, middle_size
    return low


def _best_cut(cells: list[Cell], start: int, end: int) -> int:
    """Where to end a piece that may run to ``end``: the last line break, sentence end or
    space that keeps at least half of that room (the last space at all, if none does)."""
    best: dict[int, int] = {}
    for position in range(start + 1, end + 1):
        kind = _cut_kind(cells, position)
        if kind:
            best[kind] = position
    half = start + (end - start) // 2
    for kind in (_LINE, _SENTENCE):
        if best.get(kind, 0) > half:
            return best[kind]
    if best:
        return max(best.values())
    position = end
    while position > start + 1 and _joined(cells, position):
        position -= 1
    return position


def _cut_kind(cells: list[Cell], position: int) -> int:
    """What kind of cut falls just before ``cells[position]`` (0: none)."""
    if position >= len(cells):
        return 0
    char, before = cells[position][0], cells[position - 1][0]
    if before.isspace():
        return 0  # only at the start of a run of whitespace
    if char.isspace():
        if "\n" in _whitespace_run(cells, position):
            return _LINE
        if before in _SENTENCE_END or (
            before in _SENTENCE_CLOSERS
            and position >= 2
            and cells[position - 2][0] in _SENTENCE_END
        ):
            return _SENTENCE
        return _WORD
    if before in _NO_SPACE_SENTENCE_END and char not in _SENTENCE_CLOSERS:
        return _SENTENCE
    return 0


def _whitespace_run(cells: list[Cell], position: int) -> str:
    end = _skip_space(cells, position)
    return "".join(char for char, _ in cells[position:end])


def _joined(cells: list[Cell], position: int) -> bool:
    """Whether a cut before ``cells[position]`` would split one visible character: a
    combining mark, a joiner or variation selector, a skin tone, a flag's second half."""
    before, char = cells[position - 1][0], cells[position][0]
    if char in _JOINERS or before == "\u200d" or unicodedata.combining(char):
        return True
    if unicodedata.category(char) in ("Mn", "Me", "Mc") or "\U0001f3fb" <= char <= "\U0001f3ff":
        return True
    if _regional(char) and _regional(before):
        run = 0
        while position - 1 - run >= 0 and _regional(cells[position - 1 - run][0]):
            run += 1
        return run % 2 == 1
    return False


def _regional(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"
