"""Cutting a Markdown reply into messages a platform will take, shared by every channel.

Telegram takes 4096 UTF-16 units per message, Discord 2000 characters; each channel calls
:func:`split` with its own limit. Cuts fall between paragraphs first, then between sentences,
lines and words. A fenced code block is never cut mid-line; one longer than a chunk is closed
at the cut and reopened (same language) in the next chunk, so every chunk renders on its own.

Lengths are measured in UTF-16 code units: that is how Telegram counts, and for Discord (which
counts characters) it is never less than the real length, so a chunk that fits here fits there.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？…])\s+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (an emoji is usually two)."""
    return len(text.encode("utf-16-le")) // 2


def _opening_fence(line: str) -> re.Match[str] | None:
    match = _FENCE.match(line)
    if match is None or match.group(1) in line.strip()[len(match.group(1)) :]:
        return None  # ```inline``` on one line is a code span, not a block
    return match


def blocks(markdown: str) -> list[tuple[str, str, str]]:
    """("text", "", text) and ("code", language, code) pieces, in order; joined with a
    newline they give the original layout. An unclosed fence runs to the end (a reply cut
    short, or a stream still being written)."""
    found: list[tuple[str, str, str]] = []
    text: list[str] = []
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = _opening_fence(lines[index])
        if opening is None:
            text.append(lines[index])
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2)
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        found.append(("text", "", "\n".join(text)))
        found.append(("code", language, "\n".join(lines[index + 1 : end])))
        text = []
        index = end + 1
    found.append(("text", "", "\n".join(text)))
    return found


def split(markdown: str, limit: int) -> list[str]:
    """Cut a reply into chunks of at most ``limit`` UTF-16 units (see the module docstring)."""
    if not markdown.strip():
        return [markdown] if markdown else []
    pieces: list[str] = []
    for kind, language, body in blocks(markdown.strip("\n")):
        if kind == "code":
            pieces.extend(_split_code(language, body, limit))
        else:
            for paragraph in _PARAGRAPH_BREAK.split(body.strip("\n")):
                if paragraph.strip():
                    pieces.extend(_split_text(paragraph, limit))
    return _pack(pieces, limit)


def _pack(pieces: list[str], limit: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        joined = f"{current}\n\n{piece}" if current else piece
        if utf16_len(joined) <= limit:
            current = joined
        else:
            chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


def _split_text(paragraph: str, limit: int) -> list[str]:
    if utf16_len(paragraph) <= limit:
        return [paragraph]
    for separator in (_SENTENCE_END, re.compile(r"\n"), re.compile(r"(?<=\s)")):
        parts = [p for p in separator.split(paragraph) if p]
        if len(parts) > 1:
            return _greedy(parts, limit, " " if separator is _SENTENCE_END else "")
    return _hard_cut(paragraph, limit)


def _greedy(parts: list[str], limit: int, glue: str) -> list[str]:
    """Join consecutive parts while they fit; a part too long on its own is cut further."""
    out: list[str] = []
    current = ""
    for part in parts:
        candidate = f"{current}{glue}{part}" if current else part
        if utf16_len(candidate) <= limit:
            current = candidate
            continue
        if current:
            out.append(current)
        if utf16_len(part) <= limit:
            current = part
        else:
            *whole, current = _split_text(part, limit)
            out.extend(whole)
    if current:
        out.append(current)
    return out


def _hard_cut(text: str, limit: int) -> list[str]:
    out: list[str] = []
    current = ""
    for char in text:
        if utf16_len(current) + utf16_len(char) > limit:
            out.append(current)
            current = ""
        current += char
    if current:
        out.append(current)
    return out


def _split_code(language: str, body: str, limit: int) -> list[str]:
    opening, closing = f"```{language}\n", "\n```"
    if utf16_len(opening + closing) > limit // 2:
        opening = "```\n"  # an absurdly long language name is not worth a chunk
    room = limit - utf16_len(opening) - utf16_len(closing)
    lines: list[str] = []
    for line in body.split("\n"):
        lines.extend(_hard_cut(line, room) if utf16_len(line) > room else [line])
    found: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        extra = utf16_len(line) + (1 if current else 0)
        if current and size + extra > room:
            found.append(opening + "\n".join(current) + closing)
            current, size = [], 0
            extra = utf16_len(line)
        current.append(line)
        size += extra
    found.append(opening + "\n".join(current) + closing)
    return found
