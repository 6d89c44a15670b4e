"""Reply markers: what is acted on, and that no marker survives on any path."""

from __future__ import annotations

from bot.services.speech import speakable
from bot.text import markers


def test_markers_are_parsed_once_each_and_removed_from_the_text() -> None:
    marked = markers.parse("Nice! [[react:❤️]] See you [[sticker:Happy]]\n[[react:❤️]][[silent]]")
    assert marked.text == "Nice! See you"
    assert marked.reactions == ("❤️",)
    assert marked.stickers == ("happy",)
    assert marked.silent


def test_text_without_markers_is_left_as_written() -> None:
    text = "A list:\n- one  two\n- [link](https://x.y) and [[not a marker"
    assert markers.parse(text).text == text
    assert markers.parse(text).reactions == ()


def test_a_preview_never_shows_a_marker_being_written() -> None:
    assert markers.strip_preview("Hello there [[rea") == "Hello there"
    assert markers.strip_preview("Hello [[react:❤]") == "Hello"
    assert markers.strip_preview("Hello [[react:❤]] you") == "Hello you"


def test_speech_never_reads_markers_code_links_or_markup() -> None:
    text = "**Hi** [[react:❤]] see [the docs](https://x.y/z), https://a.b\n```\ncode\n```\n- `x` ok"
    assert speakable(text) == "Hi see the docs,\nok"
