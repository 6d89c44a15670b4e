"""Text a user or a model wrote, made literal before it reaches the owner.

Owner-facing answers (pairing notices, ``/admin`` answers, failure notices) are Markdown that
each channel renders. A stranger's display name ``[Tap to verify](https://evil.example)`` or a
memory entry ``**Owner** _approved_`` must show as the characters it is, not as a live link or
emphasis, and a right-to-left override (U+202E) must not reverse the rest of the line — the
pairing code included. So every such value goes through :func:`literal` (or
:func:`literal_line` for one-line values like names):

- Markdown punctuation is backslash-escaped (CommonMark escapes, which every channel honours:
  Discord natively, Telegram in ``adapters/telegram_format.py``, the console by unescaping),
  and so is the dot of a number that would open a numbered list at the start of a line;
- explicit bidi controls are removed and a value holding right-to-left letters is wrapped in
  an isolate (FSI ... PDI), so it cannot reorder the text around it.
"""

from __future__ import annotations

import re
import unicodedata

ESCAPED = frozenset("\\`*_~[]()<>#|-+=&")
"""The Markdown punctuation escaped: enough that no emphasis, code, link, heading (ATX or
setext), quote, list bullet, table, HTML, entity reference or spoiler can start from inside
a value."""
_ORDERED_ITEM = re.compile(r"^([ \t]*\d+)\.", re.MULTILINE)
"""A number and a dot opening a line would start a numbered list."""

BIDI_CONTROLS = frozenset(
    "\u202a\u202b\u202c\u202d\u202e"  # LRE RLE PDF LRO RLO
    "\u2066\u2067\u2068\u2069"  # LRI RLI FSI PDI
    "\u200e\u200f\u061c"  # LRM RLM ALM
)
FIRST_STRONG_ISOLATE = "\u2068"
POP_DIRECTIONAL_ISOLATE = "\u2069"
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")


def literal(text: str) -> str:
    """``text`` as Markdown that renders as exactly these characters, bidi-isolated."""
    cleaned = "".join(ch for ch in text if ch not in BIDI_CONTROLS)
    escaped = "".join("\\" + ch if ch in ESCAPED else ch for ch in cleaned)
    escaped = _ORDERED_ITEM.sub(r"\1\\.", escaped)
    if any(unicodedata.bidirectional(ch) in ("R", "AL") for ch in cleaned):
        return FIRST_STRONG_ISOLATE + escaped + POP_DIRECTIONAL_ISOLATE
    return escaped


def literal_line(text: str) -> str:
    """A one-line value (a name, a title): line breaks become spaces, so a display name can
    not start a line of its own that looks like the gateway speaking."""
    return literal(_LINE_BREAKS.sub(" ", text).strip())


def unescape(markdown: str) -> str:
    """Backslash escapes resolved, for a channel that prints Markdown as plain text."""
    return _ESCAPE.sub(r"\1", markdown)
