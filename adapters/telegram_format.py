"""The model's Markdown as Telegram HTML, and replies cut into messages Telegram will take.

Telegram's HTML accepts a handful of tags and rejects the whole message over one stray ``<``,
so everything that is not a recognised Markdown construct is escaped: bold, italic,
strikethrough, inline code, fenced code blocks (with their language), links and headings
(shown bold) become tags; a backslash escape (``\\*``) is the literal character, which is how
text a user wrote is shown to the owner as it is (``bot/literal.py``); anything else stays
text. If a construct is left unbalanced the
result is still well-formed HTML, and :func:`render` checks that before returning it.

Telegram counts a message's length after parsing, in UTF-16 code units, up to 4096. Rendering
never makes the visible text longer than the Markdown it came from, so :func:`split` measures
the Markdown: a chunk that fits as Markdown fits as HTML, and as the plain-text fallback. The
cutting itself is shared with the other channels (``adapters/chunking.py``).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from adapters import chunking
from adapters.chunking import utf16_len as utf16_len  # how Telegram counts; used beside render

MAX_MESSAGE_UTF16 = 4096
NAME_PREFIX_RESERVE = 64
"""Room kept in every chunk for a partner's name ("Name: ", names are <= 60 characters)."""
CHUNK_UTF16 = MAX_MESSAGE_UTF16 - NAME_PREFIX_RESERVE

_INLINE_CODE = re.compile(r"(?<!\\)(`+)(.+?)\1", re.DOTALL)
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
"""A CommonMark backslash escape: the punctuation after it is a literal character."""
_LINK = re.compile(r"\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_BOLD_STAR = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_BOLD_UNDERSCORE = re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n<>]+?)(?<=[^\s*])\*(?![\w*])")
_ITALIC_UNDERSCORE = re.compile(r"(?<![\w_])_(?=[^\s_])([^_\n<>]+?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)([^~\n<>]+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BULLET = re.compile(r"^([ \t]*)[*+-][ \t]+", re.MULTILINE)
_PLACEHOLDER = re.compile("\x00(\\d+)\x00")
_TAG = re.compile(r"<(/?)([a-z-]+)[^<>]*>")
_SAFE_SCHEMES = ("http://", "https://", "tg://", "mailto:")


@dataclass(frozen=True)
class Rendered:
    html: str
    """For ``parse_mode="HTML"``."""
    plain: str
    """The same visible text without formatting, for when Telegram rejects the HTML."""


def render(markdown: str) -> Rendered:
    """Markdown -> Telegram HTML (and its plain-text twin)."""
    markdown = markdown.replace("\x00", "")  # NUL marks placeholders in _inline
    parts: list[str] = []
    for kind, language, body in chunking.blocks(markdown):
        if kind == "code":
            css = f' class="language-{html.escape(language)}"' if language else ""
            parts.append(f"<pre><code{css}>{html.escape(body, quote=False)}</code></pre>")
        elif body:
            parts.append(_inline(body))
    rendered = "\n".join(parts)
    if not _well_formed(rendered):
        rendered = html.escape(markdown, quote=False)
    return Rendered(rendered, to_plain(rendered))


def to_plain(rendered_html: str) -> str:
    return html.unescape(_TAG.sub("", rendered_html))


def _inline(text: str) -> str:
    """Escape a text block and turn its inline Markdown into tags. Code spans and links are
    set aside as placeholders first, so no later pattern can reach inside them."""
    kept: list[str] = []

    def keep(fragment: str) -> str:
        kept.append(fragment)
        return f"\x00{len(kept) - 1}\x00"

    def code(match: re.Match[str]) -> str:
        return keep(f"<code>{html.escape(match.group(2).strip(), quote=False)}</code>")

    text = _INLINE_CODE.sub(code, text)
    text = _ESCAPE.sub(lambda m: keep(html.escape(m.group(1), quote=False)), text)
    text = html.escape(text, quote=False)

    def link(match: re.Match[str]) -> str:
        label, url = match.group(1), html.unescape(match.group(2))
        if not url.startswith(_SAFE_SCHEMES):
            return match.group(0)
        return keep(f'<a href="{html.escape(url, quote=True)}">{_emphasis(label)}</a>')

    text = _LINK.sub(link, text)
    text = _HEADING.sub(r"<b>\1</b>", text)
    text = _BULLET.sub(r"\1• ", text)
    text = _emphasis(text)
    return _PLACEHOLDER.sub(lambda m: kept[int(m.group(1))], text)


def _emphasis(text: str) -> str:
    text = _BOLD_STAR.sub(r"<b>\1</b>", text)
    text = _BOLD_UNDERSCORE.sub(r"<b>\1</b>", text)
    text = _ITALIC_STAR.sub(r"<i>\1</i>", text)
    text = _ITALIC_UNDERSCORE.sub(r"<i>\1</i>", text)
    return _STRIKE.sub(r"<s>\1</s>", text)


def _well_formed(rendered_html: str) -> bool:
    """Tags properly nested: overlapping emphasis (``**a *b** c*``) would be refused."""
    stack: list[str] = []
    for match in _TAG.finditer(rendered_html):
        closing, name = match.group(1) == "/", match.group(2)
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


# ---- splitting -----------------------------------------------------------------------


def split(markdown: str, limit: int = CHUNK_UTF16) -> list[str]:
    """Cut a reply into chunks of at most ``limit`` UTF-16 units (``adapters/chunking.py``):
    paragraphs, then sentences, lines, words; code blocks closed and reopened at a cut."""
    return chunking.split(markdown, limit)
