"""Markers a partner may write into a reply, and the one place that finds and removes them.

A reply may carry ``[[silent]]`` (say nothing), ``[[react:EMOJI]]`` (react to the user's message
with one emoji) and ``[[sticker:NAME]]`` (send a sticker the owner listed in preset.yml
``stickers:``). The code acts on them and strips them on every path — the text sent, streaming
previews, speech, the history the owner reads (docs/architecture.md "Decisions": markers in
replies). Markers cost no tool schema on every turn: the model writes them like text.

Plain text in, plain text out: this module knows no platform and no partner (a turn hands
:func:`acted_on` the partner's sticker lookup).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.store import NewMedia

logger = logging.getLogger(__name__)

EMPTY_ANSWER = "…"
"""What a reply shows that has nothing else to show (and no marker asking for silence)."""

SILENCE = "[[silent]]"
MARKER = re.compile(
    r"\[\[\s*(?:(?P<silent>silent)|react\s*:\s*(?P<react>[^\[\]\n]{1,16}?)"
    r"|sticker\s*:\s*(?P<sticker>[\w-]{1,64}))\s*\]\]",
    re.IGNORECASE,
)
UNFINISHED = re.compile(r"\[\[[^\[\]\n]{0,80}\]?$")
"""A marker the model has begun but not closed yet (the end of a streamed preview)."""
LINE_END_SPACE = re.compile(r"[ \t]+\n")
DOUBLE_SPACE = re.compile(r"(?<=\S)[ \t]{2,}(?=\S)")


@dataclass(frozen=True)
class Marked:
    """A reply with its markers taken out: the text to show and what to do besides."""

    text: str
    silent: bool = False
    reactions: tuple[str, ...] = ()
    stickers: tuple[str, ...] = ()


def parse(reply: str) -> Marked:
    """The reply's text without markers, and the markers it carried (in order, once each)."""
    silent = False
    reactions: list[str] = []
    stickers: list[str] = []
    for match in MARKER.finditer(reply):
        if match.group("silent"):
            silent = True
        elif (emoji := match.group("react")) is not None and emoji.strip() not in reactions:
            reactions.append(emoji.strip())
        elif (name := match.group("sticker")) is not None and name.lower() not in stickers:
            stickers.append(name.lower())
    return Marked(strip(reply), silent, tuple(reactions), tuple(stickers))


def strip(text: str) -> str:
    """``text`` without any marker (and without the spaces a removed marker leaves)."""
    cleaned, removed = MARKER.subn("", text)
    if not removed:
        return text.strip()
    cleaned = LINE_END_SPACE.sub("\n", cleaned)
    return DOUBLE_SPACE.sub(" ", cleaned).strip()


def strip_preview(text: str) -> str:
    """What a live preview may show of a reply still being written: no marker, and no
    marker half-written at its end (``[[rea``)."""
    return UNFINISHED.sub("", strip(text)).rstrip()


def acted_on(raw: str, sticker_of: Callable[[str], str | None]) -> tuple[str, tuple[NewMedia, ...]]:
    """The reply's text without markers, and the reactions and stickers they asked for
    (acted on by delivery). ``sticker_of`` is the platform's id for a sticker name, None for
    a name not in the partner's preset.yml ``stickers:`` (ignored)."""
    marked = parse(raw)
    actions = [NewMedia("react", emoji) for emoji in marked.reactions]
    for name in marked.stickers:
        sticker = sticker_of(name)
        if sticker is None:
            logger.info("sticker %r is not in the partner's preset.yml; ignored", name)
            continue
        actions.append(NewMedia("sticker", sticker))
    text = marked.text
    if not text and not actions and not marked.silent:
        text = EMPTY_ANSWER
    return text, tuple(actions)
