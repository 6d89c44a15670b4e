"""Telegram's HTML parse mode, as the Bot API applies it to a message: the visible text and the
entities it carries, or the error Telegram answers.

What Telegram does, and this module with it (Bot API "Formatting options", and tdlib's
``parse_html``):

* Tags: ``b strong i em u ins s strike del span tg-spoiler a code pre blockquote tg-emoji``;
  any other tag, an unclosed or unmatched one, is refused with "can't parse entities" and the
  byte offset.
* Character references: only ``&lt; &gt; &amp; &quot;`` and numeric ones are decoded; any
  other (``&copy;``) stays as the characters it is.
* ``<a href>``: a link Telegram cannot use (``javascript:``, a relative path) makes no
  entity; its text stays. ``<pre><code class="language-x">`` is one ``pre`` entity with a
  language. An element with no text makes no entity.
* Nesting: bold, italic, underline, strikethrough and spoiler may sit inside and around any
  entity but ``pre`` and ``code``; blockquotes cannot be nested; the other entities (links,
  code, pre, custom emoji) cannot contain one another. Telegram does not refuse a message that
  breaks these rules: it drops the inner entity, and so does this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

TAG_ENTITIES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "span": "spoiler",
    "tg-spoiler": "spoiler",
    "a": "text_link",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
FORMATTING = frozenset({"bold", "italic", "underline", "strikethrough", "spoiler"})
QUOTES = frozenset({"blockquote", "expandable_blockquote"})
LINK_SCHEMES = ("http://", "https://", "tg://", "mailto:")

_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:\s[^<>]*)?)>")
_ATTRIBUTE = re.compile(r"""([A-Za-z-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""")
_REFERENCE = re.compile(r"&(?:#[xX]([0-9A-Fa-f]{1,8})|#([0-9]{1,8})|([A-Za-z]+));?")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


class HtmlError(ValueError):
    """Telegram refuses the text: the message is its ``Bad Request`` description."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def decode_references(text: str) -> str:
    """Character references as Telegram decodes them; unknown names stay as written."""

    def one(match: re.Match[str]) -> str:
        hex_digits, decimal, name = match.groups()
        if name is not None:
            return _NAMED.get(name, match.group(0))
        code = int(hex_digits, 16) if hex_digits is not None else int(decimal)
        if code == 0 or code >= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return match.group(0)
        return chr(code)

    return _REFERENCE.sub(one, text)


@dataclass
class _Open:
    tag: str
    kind: str | None
    start: int
    order: int
    """Opening order: of two entities over the same text, the one opened first is outside."""
    attributes: dict[str, str] = field(default_factory=dict)


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(visible text, entities with UTF-16 offsets) of an HTML message; raises HtmlError."""
    visible: list[str] = []
    offset = 0
    stack: list[_Open] = []
    entities: list[tuple[int, dict[str, Any]]] = []
    opened_tags: list[str] = []
    position = 0
    while True:
        index = text.find("<", position)
        chunk = decode_references(text[position : index if index >= 0 else len(text)])
        visible.append(chunk)
        offset += utf16_len(chunk)
        if index < 0:
            break
        match = _TAG.match(text, index)
        at = len(text[:index].encode("utf-8"))
        if match is None:
            following = re.match(r"/?([^\s<>/]*)", text[index + 1 :])
            name = following.group(1) if following else ""
            raise HtmlError(f'Unsupported start tag "{name}" at byte offset {at}')
        closing, name = match.group(1) == "/", match.group(2).lower()
        if name not in TAG_ENTITIES:
            raise HtmlError(f'Unsupported start tag "{name}" at byte offset {at}')
        if not closing:
            attributes = _attributes(match.group(3))
            kind = _kind(name, attributes, stack)
            stack.append(_Open(name, kind, offset, len(opened_tags), attributes))
            opened_tags.append(name)
        elif not stack or stack[-1].tag != name:
            expected = f'expected "</{stack[-1].tag}>", ' if stack else ""
            raise HtmlError(f'Unmatched end tag at byte offset {at}, {expected}found "</{name}>"')
        else:
            opened = stack.pop()
            stack_order = opened.order
            entity = _entity(opened, offset, "".join(visible))
            if entity is not None:
                entities.append((stack_order, entity))
        position = match.end()
    if stack:
        raise HtmlError(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    entities.sort(key=lambda pair: (pair[1]["offset"], -pair[1]["length"], pair[0]))
    return "".join(visible), _allowed_nesting([entity for _, entity in entities])


def _attributes(raw: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(raw or ""):
        value = next((v for v in match.groups()[1:] if v is not None), "")
        found[match.group(1).lower()] = decode_references(value)
    return found


def _kind(name: str, attributes: dict[str, str], stack: list[_Open]) -> str | None:
    if name == "code" and stack and stack[-1].tag == "pre":
        # <pre><code class="language-x">: the language of the pre, not an entity of its own
        stack[-1].attributes.setdefault("language", _language(attributes.get("class", "")))
        return None
    if name == "span" and attributes.get("class") != "tg-spoiler":
        raise HtmlError('Unsupported start tag "span" without class "tg-spoiler"')
    if name == "blockquote" and "expandable" in attributes:
        return "expandable_blockquote"
    return TAG_ENTITIES[name]


def _language(css_class: str) -> str:
    return css_class.removeprefix("language-") if css_class.startswith("language-") else ""


def _entity(opened: _Open, end: int, visible: str) -> dict[str, Any] | None:
    length = end - opened.start
    if opened.kind is None or length <= 0:
        return None
    entity: dict[str, Any] = {"type": opened.kind, "offset": opened.start, "length": length}
    if opened.kind == "text_link":
        url = opened.attributes.get("href") or _utf16_slice(visible, opened.start, end)
        if not url.startswith(LINK_SCHEMES) or len(url) <= len(url.split(":", 1)[0]) + 3:
            return None  # Telegram keeps the text and makes no link
        entity["url"] = url
    if opened.kind == "pre" and opened.attributes.get("language"):
        entity["language"] = opened.attributes["language"]
    if opened.kind == "custom_emoji":
        entity["custom_emoji_id"] = opened.attributes.get("emoji-id", "")
    return entity


def _utf16_slice(text: str, start: int, end: int) -> str:
    encoded = text.encode("utf-16-le")
    return encoded[start * 2 : end * 2].decode("utf-16-le", errors="replace")


def _allowed_nesting(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop each entity that sits where Telegram allows none (see the module docstring)."""
    kept: list[dict[str, Any]] = []
    for entity in entities:
        outer = [e for e in kept if _contains(e, entity)]
        if not any(_may_not_contain(e["type"], entity["type"]) for e in outer):
            kept.append(entity)
    return kept


def _contains(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    return (
        outer["offset"] <= inner["offset"]
        and inner["offset"] + inner["length"] <= outer["offset"] + outer["length"]
    )


def _may_not_contain(outer: str, inner: str) -> bool:
    if outer in ("pre", "code"):
        return True
    if outer in QUOTES:
        return inner in QUOTES
    if outer in FORMATTING or inner in FORMATTING:
        return False
    return inner not in QUOTES


def plain_text(text: str) -> str:
    """The visible text of HTML that :func:`parse_html` accepts."""
    return parse_html(text)[0]
