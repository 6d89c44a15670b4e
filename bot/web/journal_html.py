"""A journal day's Markdown as HTML for the web page, with nothing in it that can run.

Journals are written by a model from what users said, so their text is hostile until shown
otherwise. markdown-it-py renders them with raw HTML off (``<script>`` is text), links only
to http, https and mailto (``javascript:``, ``data:``, relative addresses stay text), no
images (nothing is fetched), and bidi controls removed. What :func:`journal_html` returns is
the one HTML of a model's text the page trusts; the page's Content-Security-Policy (no script
at all) stands behind it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup

from bot.web.pages import plain

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"
DEEPEST_HEADING = 6
_DIRECTED = frozenset({"paragraph_open", "heading_open", "list_item_open"})


class _JournalMarkdown(MarkdownIt):
    """CommonMark without raw HTML or images, whose links keep only :data:`LINK_SCHEMES`."""

    def __init__(self) -> None:
        super().__init__("commonmark", {"html": False})
        self.disable("image")

    def validateLink(self, url: str) -> bool:  # markdown-it's name for the check
        return urlsplit(url.strip()).scheme.lower() in LINK_SCHEMES


PARSER = _JournalMarkdown()


def journal_html(markdown: str) -> Markup:
    """The day's entries as HTML: headings one level down (the page has its own ``h1``),
    each block ``dir=auto`` so right-to-left text keeps its direction, links marked
    ``rel=noopener``."""
    tokens = PARSER.parse(plain(markdown))
    for token in tokens:
        _adjust(token)
    return Markup(PARSER.renderer.render(tokens, PARSER.options, {}))


def _adjust(token: Token) -> None:
    if token.type in ("heading_open", "heading_close"):
        level = min(int(token.tag[1:]) + 1, DEEPEST_HEADING)
        token.tag = f"h{level}"
    if token.type in _DIRECTED:
        token.attrSet("dir", "auto")
    for child in token.children or ():
        if child.type == "link_open":
            child.attrSet("rel", LINK_REL)
