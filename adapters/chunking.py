"""Cutting a Markdown reply into messages a platform will take, shared by every channel.

Telegram takes 4096 UTF-16 units of visible text per message, Discord 2000 characters of
Markdown; each channel calls :func:`split` with its limit and how it measures a message.

Every chunk is Markdown that stands on its own and shows what the reply showed there. The reply is
parsed (``adapters/markdown_parse.py``) and cut between blocks first, keeping the blank lines
between them. A block too long for one message is cut by its structure: a list between items (each
keeps its number), a quote inside, each piece quoted again, a table between rows with its header
repeated, a code block between lines, closed and reopened with its language
(``adapters/chunk_code.py``; the room a message has: ``adapters/chunk_room.py``). A paragraph or
heading is cut at line breaks, sentence ends or spaces, with bold, italic, links and code closed at
the cut and opened again after it (``adapters/markdown_inline.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from markdown_it.token import Token

from adapters.chunk_code import cut_code, fenced
from adapters.chunk_room import Measure, Piece, Room, SpansMeasure
from adapters.markdown_inline import Span, cut, spans_of, to_markdown
from adapters.markdown_parse import parse, top_level_blocks
from adapters.markdown_table import table_text
from bot.text.utf16 import utf16_len


def split(
    markdown: str,
    limit: int,
    measure: Measure = utf16_len,
    measure_spans: SpansMeasure | None = None,
) -> list[str]:
    """Cut a reply into chunks each of at most ``limit`` by ``measure`` (module docstring).
    ``measure_spans``, if given, must agree with ``measure`` on a paragraph."""
    if not markdown.strip():
        return [markdown] if markdown else []
    pieces = _pieces(markdown, Room(limit, measure, measure_spans))
    return _pack(pieces, limit, measure)


def _pack(pieces: list[Piece], limit: int, measure: Measure) -> list[str]:
    """Join neighbouring pieces while they fit. Sizes are added up (cheap); a chunk whose
    real size comes out larger (a list renumbered to a longer number) is packed again, piece
    by piece, with real sizes."""
    sizes = [measure(piece.text) for piece in pieces]
    groups: list[list[int]] = []
    total = 0
    for index, piece in enumerate(pieces):
        extra = sizes[index] + (measure(piece.separator) if groups else 0)
        if groups and total + extra <= limit:
            groups[-1].append(index)
            total += extra
        else:
            groups.append([index])
            total = sizes[index]
    chunks: list[str] = []
    for group in groups:
        chunk = _join([pieces[i] for i in group])
        if len(group) == 1 or measure(chunk) <= limit:
            chunks.append(chunk)
        else:
            chunks.extend(_pack_exactly([pieces[i] for i in group], limit, measure))
    return chunks


def _pack_exactly(pieces: list[Piece], limit: int, measure: Measure) -> list[str]:
    chunks: list[str] = []
    current: list[Piece] = []
    for piece in pieces:
        if current and measure(_join([*current, piece])) > limit:
            chunks.append(_join(current))
            current = []
        current.append(piece)
    if current:
        chunks.append(_join(current))
    return chunks


def _join(pieces: list[Piece]) -> str:
    return "".join(
        (piece.separator if index else "") + piece.text for index, piece in enumerate(pieces)
    )


# ---- blocks ------------------------------------------------------------------------------


def _pieces(markdown: str, room: Room) -> list[Piece]:
    """The reply as pieces: each top-level block as written where it fits, else the parts it
    is cut into."""
    markdown = markdown.replace("\x00", "")
    pieces: list[Piece] = []
    previous_end: int | None = None
    previous_was_cut = False
    for block in top_level_blocks(markdown, parse(markdown)):
        between = "" if previous_end is None else markdown[previous_end : block.start]
        separator = _gap(between, after_cut=previous_was_cut or previous_end is None)
        text = markdown[block.start : block.end].strip("\n")
        fits = room.fits(text)
        parts = [Piece("\n\n", text)] if fits else _cut(block.tokens, room, whole=False)
        if parts:
            pieces.append(Piece(separator, parts[0].text))
            pieces.extend(parts[1:])
        previous_end = block.end
        previous_was_cut = not fits
    return pieces


def _gap(between: str, after_cut: bool) -> str:
    """What separates two blocks: their line breaks, and blank lines kept as blank lines.
    After a block that was cut, at least one blank line: its last part may be a paragraph
    that the next block (an empty list item, a ``---``) would continue or underline, where
    the block as written had ended it."""
    return "\n" * max(2 if after_cut else 1, between.count("\n"))


def _cut(tokens: list[Token], room: Room, whole: bool = True) -> list[Piece]:
    """One block (its tokens, opening to closing) as pieces that each fit: the whole block
    written anew from its tokens if that fits (``whole``: worth trying), else cut by its
    structure."""
    written = _written(tokens) if whole or tokens[0].type == "hr" else None
    if written is not None and room.fits(written):
        return [Piece("\n\n", written)]
    kind = tokens[0].type.removesuffix("_open")
    if kind == "paragraph":
        return _parts(cut(_spans(tokens), room.spans_size, room.limit))
    if kind == "heading":
        prefix = _heading_prefix(tokens[0])
        heading = room.inside(lambda markdown: _heading_line(prefix, markdown))
        parts = cut(_heading_spans(tokens), heading.spans_size, room.limit)
        return _parts(_heading_line(prefix, part) for part in parts)
    if kind == "fence":
        return _parts(cut_code(tokens[0].markup, tokens[0].info, tokens[0].content, room))
    if kind in ("bullet_list", "ordered_list"):
        return _cut_list(tokens, room)
    if kind == "blockquote":
        quoted = room.inside(_quote)
        pieces = [p for child in _children(tokens[1:-1]) for p in _cut(child, quoted)]
        return _parts(_quote(piece.text) for piece in pieces)
    if kind == "table":
        return _cut_table(tokens, room)
    return _parts(cut([Span(written or "", ())], room.spans_size, room.limit))


def _parts(texts: Iterable[str]) -> list[Piece]:
    return [Piece("\n\n", text) for text in texts]


def _written(tokens: list[Token]) -> str | None:
    """A block written as Markdown from its tokens (text escaped so that it means the same
    wherever it is placed); None for a block with nothing to show."""
    first = tokens[0]
    kind = first.type.removesuffix("_open")
    if kind == "paragraph":
        return to_markdown(_spans(tokens))
    if kind == "heading":
        return _heading_line(_heading_prefix(first), to_markdown(_heading_spans(tokens)))
    if kind == "fence":
        return fenced(first.markup, first.info, first.content.removesuffix("\n"))
    if kind == "hr":
        return "***"  # after a paragraph, "---" would underline it as a heading
    if kind == "table":
        return "\n".join(_table_rows(tokens))
    if kind == "blockquote":
        children = [_written(child) for child in _children(tokens[1:-1])]
        return _quote("\n\n".join(c for c in children if c is not None))
    if kind in ("bullet_list", "ordered_list"):
        tight = not _loose(tokens)
        items = [_item(marker, children, tight) for marker, children in _items(tokens)]
        return ("\n" if tight else "\n\n").join(items)
    return None


def _children(tokens: list[Token]) -> list[list[Token]]:
    """Consecutive blocks at one level, each as its tokens."""
    found: list[list[Token]] = []
    index = 0
    while index < len(tokens):
        end = index
        if tokens[index].nesting == 1:
            depth = 0
            for end in range(index, len(tokens)):
                depth += tokens[end].nesting
                if depth == 0:
                    break
        found.append(tokens[index : end + 1])
        index = end + 1
    return found


def _spans(tokens: list[Token]) -> list[Span]:
    inline = next(token for token in tokens if token.type == "inline")
    return spans_of(inline.children or [])


def _heading_prefix(token: Token) -> str:
    return "#" * int(token.tag[1]) + " "


_CLOSING_SEQUENCE = re.compile(r"(?:^|(?<=[ \t]))#+[ \t]*$")
"""A run of ``#`` that ends a heading's line after a space: Markdown reads it as the
heading's optional closing sequence and shows none of it."""


def _heading_line(prefix: str, markdown: str) -> str:
    """A heading's text written after its ``#`` prefix. Text that ends in ``#`` after a
    space (a heading cut after " #", or a "#" that was escaped) has the run's first ``#``
    escaped, so that it is shown as text on Telegram and Discord alike."""
    return prefix + _CLOSING_SEQUENCE.sub(lambda match: "\\" + match.group(0), markdown)


def _heading_spans(tokens: list[Token]) -> list[Span]:
    # written as "# ...", a heading is one line (an underlined one may have had several)
    return [Span(span.text.replace("\n", " "), span.marks) for span in _spans(tokens)]


# ---- lists, quotes, tables -----------------------------------------------------------------


def _items(tokens: list[Token]) -> list[tuple[str, list[list[Token]]]]:
    """Each item of a list: its marker as written anew (numbers counted from the list's
    start, as they are shown) and its blocks."""
    ordered = tokens[0].type == "ordered_list_open"
    number = int(tokens[0].attrGet("start") or 1)
    found: list[tuple[str, list[list[Token]]]] = []
    for item in _children(tokens[1:-1]):
        opening = item[0]
        marker = f"{number + len(found)}{opening.markup} " if ordered else f"{opening.markup} "
        found.append((marker, _children(item[1:-1])))
    return found


def _item(marker: str, children: list[list[Token]], tight: bool) -> str:
    written = [_written(child) for child in children]
    body = ("\n" if tight else "\n\n").join(w for w in written if w is not None)
    return marker + _indent(body, len(marker), first=False)


def _cut_list(tokens: list[Token], room: Room) -> list[Piece]:
    """A list between its items; an item too long on its own is cut inside."""
    tight = not _loose(tokens)
    pieces: list[Piece] = []
    after_whole_item = False
    for marker, children in _items(tokens):
        whole = _item(marker, children, tight)
        parts = [whole] if room.fits(whole) else _item_parts(marker, children, room)
        # a line break joins two items; after the cut part of one, it would join the next
        # item to a paragraph (an empty item "- " would underline it as a heading)
        pieces.append(Piece("\n" if tight and after_whole_item else "\n\n", parts[0]))
        pieces.extend(_parts(parts[1:]))
        after_whole_item = len(parts) == 1
    return pieces


def _item_parts(marker: str, children: list[list[Token]], room: Room) -> list[str]:
    """An item's blocks cut to fit: the first part after the marker, the rest indented under
    it (so that beside the item they continue it). Each part is cut to fit after the marker,
    the stricter of the two places (a marker shows, an indent may not)."""
    width = len(marker)
    after_marker = room.inside(lambda markdown: marker + _indent(markdown, width, first=False))
    parts = [piece.text for child in children for piece in _cut(child, after_marker)]
    if not parts:
        return [marker.rstrip()]
    first = marker + _indent(parts[0], width, first=False)
    return [first, *(_indent(part, width, first=True) for part in parts[1:])]


def _loose(tokens: list[Token]) -> bool:
    return any(t.type == "paragraph_open" and not t.hidden for t in tokens)


def _indent(text: str, width: int, first: bool) -> str:
    pad = " " * width
    lines = text.split("\n")
    head = pad + lines[0] if first else lines[0]
    return "\n".join([head, *(pad + line if line else line for line in lines[1:])])


def _quote(markdown: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in markdown.split("\n"))


def _table_rows(tokens: list[Token]) -> list[str]:
    """A table written anew: its header, the delimiter row (alignments kept), its rows."""
    rows: list[list[str]] = []
    aligns: list[str] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open") and len(rows) == 1:
            aligns.append(str(token.attrGet("style") or "").removeprefix("text-align:"))
        elif token.type == "inline":
            rows[-1].append(token.content)
    rule = {"left": ":---", "right": "---:", "center": ":---:"}
    delimiter = [rule.get(align, "---") for align in aligns]
    return [_row(rows[0]), _row(delimiter), *(_row(row) for row in rows[1:])]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _cut_table(tokens: list[Token], room: Room) -> list[Piece]:
    """A table between rows, each piece with the header again; a table whose header and
    one row are already too long becomes its text as a code block, cut between lines."""
    header, delimiter, *rows = _table_rows(tokens)
    head = [header, delimiter]
    if not rows or not all(room.fits("\n".join([*head, row])) for row in rows):
        return _parts(cut_code("```", "", table_text(tokens), room))
    pieces: list[Piece] = []
    current: list[str] = []
    for row in rows:
        if current and not room.fits("\n".join([*head, *current, row])):
            pieces.append(Piece("\n\n", "\n".join([*head, *current])))
            current = []
        current.append(row)
    pieces.append(Piece("\n\n", "\n".join([*head, *current])))
    return pieces
