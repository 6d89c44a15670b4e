"""A Markdown table as preformatted text: columns padded to line up in a monospaced font.

Telegram has no tables, and a table written as Markdown is a thicket of pipes on a phone. As
text in a ``pre`` block it lines up::

    Film  | Year
    ------+-----
    Alien | 1979

Cells lose their inline formatting (nothing may sit inside ``pre``); wide characters (CJK,
emoji) count as two columns, combining marks as none.
"""

from __future__ import annotations

import unicodedata

from markdown_it.token import Token

from adapters.markdown_inline import spans_of

COLUMN_GAP = " | "
RULE_GAP = "-+-"


def table_text(tokens: list[Token]) -> str:
    """The rows of a table (its tokens, ``table_open`` to ``table_close``) as lined-up text."""
    rows: list[list[str]] = []
    aligns: list[str] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type in ("th_open", "td_open") and len(rows) == 1:
            style = str(token.attrGet("style") or "")
            aligns.append(style.removeprefix("text-align:") or "left")
        elif token.type == "inline":
            text = "".join(span.text for span in spans_of(token.children or []))
            rows[-1].append(" ".join(text.split("\n")))
    if not rows:
        return ""
    count = max(len(row) for row in rows)
    aligns += ["left"] * (count - len(aligns))
    widths = [
        max((_width(row[i]) for row in rows if i < len(row)), default=0) for i in range(count)
    ]
    lines = [_line(rows[0], widths, aligns), RULE_GAP.join("-" * w for w in widths)]
    lines += [_line(row, widths, aligns) for row in rows[1:]]
    return "\n".join(line.rstrip() for line in lines)


def _line(row: list[str], widths: list[int], aligns: list[str]) -> str:
    cells = row + [""] * (len(widths) - len(row))
    return COLUMN_GAP.join(
        _pad(cell, width, align) for cell, width, align in zip(cells, widths, aligns, strict=True)
    )


def _pad(text: str, width: int, align: str) -> str:
    room = width - _width(text)
    if align == "right":
        return " " * room + text
    if align == "center":
        return " " * (room // 2) + text + " " * (room - room // 2)
    return text + " " * room


def _width(text: str) -> int:
    """Columns ``text`` takes in a monospaced font."""
    total = 0
    for char in text:
        if unicodedata.combining(char) or char in "\u200d\ufe0f":
            continue
        total += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return total
