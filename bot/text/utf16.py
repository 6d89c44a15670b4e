"""How long a text is where a platform counts UTF-16 code units (Telegram's limits, captions):
the one measure the channels' chunker and delivery both need."""

from __future__ import annotations


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (an emoji is usually two): how Telegram counts."""
    return len(text.encode("utf-16-le")) // 2
