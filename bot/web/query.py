"""The query parameters of the web page's addresses, read strictly.

A number is ASCII digits only (no sign, no exponent, no other script's digits) from 1 to a
bound; a text is at most :data:`MAX_TEXT_CHARS` characters with no control characters; a
parameter comes once. Anything else is answered with a 400 page that names the parameter and
what it takes. An empty value is the same as none: that is what a form's empty field sends.

A page number past the last page shows the last page: the list may have shrunk since the link
was made, and its newest last page is what such a link was after.
"""

from __future__ import annotations

import re
import unicodedata

from aiohttp import web

from bot.web.security import error_page

MAX_PAGE_NUMBER = 1_000_000
MAX_ROW_ID = 2**63 - 1
"""The largest row id either database stores (a signed 64-bit integer)."""
MAX_TEXT_CHARS = 200
SHOWN_CHARS = 40
"""How much of a refused value its 400 page repeats."""
_DIGITS = re.compile(r"[0-9]{1,19}")


def _refused(message: str) -> web.HTTPBadRequest:
    body = error_page("Not a valid address", f"{message} Fix the address, or use the page's links.")
    return web.HTTPBadRequest(text=body, content_type="text/html")


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= SHOWN_CHARS else raw[:SHOWN_CHARS] + "…")


def _value(request: web.Request, name: str) -> str | None:
    values = request.query.getall(name, [])
    if len(values) > 1:
        raise _refused(f"{name} is given twice; give it once.")
    return values[0] if values and values[0] != "" else None


def number(request: web.Request, name: str, high: int) -> int | None:
    """The whole number from 1 to ``high`` in ``?name=``, or None when there is none."""
    raw = _value(request, name)
    if raw is None:
        return None
    if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= high:
        raise _refused(
            f"{name} must be a whole number from 1 to {high}, in the digits 0-9; "
            f"{_shown(raw)} is not."
        )
    return int(raw)


def page(request: web.Request, pages: int) -> int:
    """The page asked for in ``?page=`` (1 when none), the last one when past it."""
    return min(number(request, "page", MAX_PAGE_NUMBER) or 1, pages)


def pages_of(total: int, per_page: int) -> int:
    """How many pages ``total`` rows fill (an empty list is one empty page)."""
    return max(1, -(-total // per_page))


def text(request: web.Request, name: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The text in ``?name=``, trimmed ('' when there is none)."""
    raw = (_value(request, name) or "").strip()
    if len(raw) > max_chars:
        raise _refused(f"{name} is longer than {max_chars} characters; shorten it.")
    if any(unicodedata.category(ch) == "Cc" for ch in raw):
        raise _refused(f"{name} contains a control character; take it out.")
    return raw
