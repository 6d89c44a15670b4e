"""The model's Markdown as Telegram HTML, and replies cut into messages Telegram will take.

The Markdown is parsed by markdown-it-py (``adapters/markdown_parse.py``) and the tokens are
written as the handful of tags Telegram knows: bold and italic (nested as written:
``***very***`` is both), strikethrough, inline code, links (http, https, tg and mailto; any
other link shows its text and address), quotes as ``<blockquote>``, fenced code as
``<pre><code class="language-x">``, headings in bold, lists with bullets and numbers, tables as
lined-up preformatted text (``adapters/markdown_table.py``). Everything else is text, escaped:
raw HTML shows as the characters it is, and so does a CommonMark backslash escape (``\\*``),
which is how text a user wrote reaches the owner unchanged (``bot/text/literal.py``).

Telegram forbids some nesting (nothing inside code, no quote in a quote, no code inside a
link), so code in a link is shown as text and a quote in a quote joins the outer one. Text
keeps its whitespace: the blank lines between blocks and the spaces at the ends of a
paragraph's lines are shown as written.

Telegram counts a message's visible text in UTF-16 code units, up to 4096: :func:`split`
measures each chunk by that (``adapters/chunking.py`` does the cutting).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from markdown_it.token import Token

from adapters import chunking
from adapters.markdown_inline import Mark, Span, spans_of
from adapters.markdown_parse import parse, top_level_blocks
from adapters.markdown_table import table_text
from bot.text.utf16 import utf16_len as utf16_len  # how Telegram counts; used beside render

MAX_MESSAGE_UTF16 = 4096
NAME_PREFIX_RESERVE = 64
"""Room kept in every chunk for a partner's name ("Name: ", names are <= 60 characters)."""
CHUNK_UTF16 = MAX_MESSAGE_UTF16 - NAME_PREFIX_RESERVE
SAFE_SCHEMES = ("http://", "https://", "tg://", "mailto:")
BULLET = "•"
RULE = "———"
_TAG = re.compile(r"<[^<>]*>")
_PRE = re.compile(r"(<pre>.*?</pre>)", re.DOTALL)
_LINE_BREAK = re.compile(r"\n(?=[^\n])")
"""A line break before a line with text (blank lines stay blank)."""
_TAGS = {"strong": "b", "em": "i", "s": "s", "code": "code"}


@dataclass(frozen=True)
class Rendered:
    html: str
    """For ``parse_mode="HTML"``."""
    plain: str
    """The same visible text without formatting, for when Telegram rejects the HTML."""


def render(markdown: str) -> Rendered:
    """Markdown -> Telegram HTML (and its plain-text twin)."""
    source = markdown.replace("\x00", "")
    tokens = parse(source)
    parts: list[str] = []
    position = 0
    for block in top_level_blocks(source, tokens):
        parts.append(_blank_lines(source[position : block.start]))
        lines = source[block.start : block.end]
        parts.append(_Writer(lines).block(block.tokens))
        position = block.end
    parts.append(_blank_lines(source[position:]))
    rendered = "".join(parts)
    return Rendered(rendered, to_plain(rendered))


def to_plain(rendered_html: str) -> str:
    return html.unescape(_TAG.sub("", rendered_html))


def split(markdown: str, limit: int = CHUNK_UTF16) -> list[str]:
    """Cut a reply into chunks whose visible text is at most ``limit`` UTF-16 units, each
    Markdown that renders on its own with the formatting it had (``adapters/chunking.py``)."""
    return chunking.split(markdown, limit, measure=visible_length, measure_spans=_spans_length)


def visible_length(markdown: str) -> int:
    """How long Telegram counts a message: its visible text in UTF-16 code units."""
    return utf16_len(render(markdown).plain)


def _spans_length(spans: list[Span]) -> int:
    return utf16_len(to_plain(_inline_html(spans)))


def _blank_lines(between: str) -> str:
    """The source between two blocks as shown: its line breaks and whitespace-only lines (a
    link definition there is not shown)."""
    lines = between.split("\n")
    kept = [line for line in lines[1:-1] if not line.strip(" \t")]
    if len(lines) == 1:
        return lines[0] if not lines[0].strip(" \t") else ""
    head = lines[0] if not lines[0].strip(" \t") else ""
    tail = lines[-1] if not lines[-1].strip(" \t") else ""
    return "\n".join([head, *kept, tail])


@dataclass
class _Writer:
    """Writes one top-level block; ``source`` is that block's text, for the whitespace a
    paragraph starts and ends with."""

    source: str
    in_quote: bool = False
    out: list[str] = field(default_factory=list)

    def block(self, tokens: list[Token]) -> str:
        return self._blocks(tokens, top_level=True)

    def _blocks(self, tokens: list[Token], top_level: bool = False, separator: str = "\n\n") -> str:
        written: list[str] = []
        index = 0
        while index < len(tokens):
            end = _closing(tokens, index)
            written.append(self._one(tokens[index : end + 1], top_level))
            index = end + 1
        return separator.join(written)

    def _one(self, tokens: list[Token], top_level: bool) -> str:
        first = tokens[0]
        kind = first.type.removesuffix("_open")
        if kind == "paragraph":
            text = self._inline(tokens[1])
            return self._with_edges(tokens[1], text) if top_level else text
        if kind == "heading":
            return f"<b>{self._inline(tokens[1])}</b>"
        if kind == "fence":
            return _code_block((first.info.split() or [""])[0], first.content)
        if kind == "blockquote":
            return self._quote(tokens[1:-1])
        if kind in ("bullet_list", "ordered_list"):
            return self._list(tokens)
        if kind == "table":
            return f"<pre>{_escape(table_text(tokens))}</pre>"
        if kind == "hr":
            return RULE
        return _escape(first.content)

    def _with_edges(self, inline: Token, text: str) -> str:
        """A top-level paragraph with the whitespace CommonMark trimmed from its ends (its
        content is its source lines, trimmed)."""
        content = inline.content
        lead = self.source.find(content) if content else len(self.source)
        if lead < 0:
            return text
        tail = self.source[lead + len(content) :]
        return _escape(self.source[:lead]) + text + _escape(tail)

    def _quote(self, inner: list[Token]) -> str:
        if self.in_quote:  # Telegram cannot nest quotes: the inner one joins the outer
            return self._blocks(inner)
        self.in_quote = True
        try:
            return f"<blockquote>{self._blocks(inner)}</blockquote>"
        finally:
            self.in_quote = False

    def _list(self, tokens: list[Token]) -> str:
        ordered = tokens[0].type == "ordered_list_open"
        number = int(tokens[0].attrGet("start") or 1)
        tight = all(t.hidden for t in tokens if t.type == "paragraph_open")
        items: list[str] = []
        index = 1
        while index < len(tokens) - 1:
            end = _closing(tokens, index)
            marker = f"{number + len(items)}{tokens[index].markup} " if ordered else f"{BULLET} "
            body = self._blocks(tokens[index + 1 : end], separator="\n" if tight else "\n\n")
            items.append(marker + _hang(body, len(marker)))
            index = end + 1
        return ("\n" if tight else "\n\n").join(items)

    def _inline(self, inline: Token) -> str:
        return _inline_html(spans_of(inline.children or []))


def _hang(body: str, width: int) -> str:
    """A list item's later lines indented under its first, except inside code blocks (the
    indent would become part of the code)."""
    pad = "\n" + " " * width
    return "".join(
        part if part.startswith("<pre>") else _LINE_BREAK.sub(pad, part)
        for part in _PRE.split(body)
    )


def _inline_html(spans: list[Span]) -> str:
    """Spans as HTML: a tag stays open across the spans that share it, so a link with bold
    inside is one link. Code inside a link is shown as text (Telegram cannot nest them)."""
    out: list[str] = []
    open_marks: tuple[Mark, ...] = ()
    for span in spans:
        marks = tuple(m for m in span.marks if not (m.kind == "code" and _has_link(span.marks)))
        shared = 0
        while shared < min(len(open_marks), len(marks)) and open_marks[shared] == marks[shared]:
            shared += 1
        out.extend(_close(mark) for mark in reversed(open_marks[shared:]))
        out.extend(_open(mark) for mark in marks[shared:])
        out.append(_escape(span.text))
        open_marks = marks
    out.extend(_close(mark) for mark in reversed(open_marks))
    return "".join(out)


def _has_link(marks: tuple[Mark, ...]) -> bool:
    return any(mark.kind == "link" for mark in marks)


def _open(mark: Mark) -> str:
    if mark.kind == "link":
        href = mark.href
        return f'<a href="{html.escape(href, quote=True)}">' if _safe(href) else ""
    return f"<{_TAGS[mark.kind]}>"


def _close(mark: Mark) -> str:
    if mark.kind == "link":
        return "</a>" if _safe(mark.href) else f" ({_escape(mark.href)})"
    return f"</{_TAGS[mark.kind]}>"


def _safe(href: str) -> bool:
    return href.startswith(SAFE_SCHEMES)


def _code_block(language: str, code: str) -> str:
    code = code.removesuffix("\n")
    if not code:
        return ""
    css = f' class="language-{html.escape(language, quote=True)}"' if language else ""
    return f"<pre><code{css}>{_escape(code)}</code></pre>"


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _closing(tokens: list[Token], index: int) -> int:
    """The index of the token that closes the one at ``index`` (itself if it opens none)."""
    if tokens[index].nesting != 1:
        return index
    depth = 0
    for end in range(index, len(tokens)):
        depth += tokens[end].nesting
        if depth == 0:
            return end
    return len(tokens) - 1
