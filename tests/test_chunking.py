"""The shared chunker (``adapters/chunking.py``) on replies the property tests in
``tests/test_telegram_fuzz.py`` once found cut wrong: each chunk must show, as Markdown on its
own, the text the reply showed there.
"""

from __future__ import annotations

from adapters import chunking
from adapters.telegram_format import render


def _shown(markdown: str) -> str:
    """The text a reader sees, without whitespace (a cut may fall on it)."""
    return "".join(render(markdown).plain.split())


def _shown_in_chunks(markdown: str, limit: int) -> str:
    chunks = chunking.split(markdown, limit)
    assert all(len(chunk) <= limit for chunk in chunks)
    return "".join(_shown(chunk) for chunk in chunks)


def test_a_heading_cut_before_a_lone_hash_still_shows_that_hash() -> None:
    # cut after " #", the first part would end in what Markdown reads as the heading's
    # closing sequence, and that "#" would disappear
    heading = "## " + "0" * 44 + " # 0000"
    assert _shown_in_chunks(heading, 50) == _shown(heading)


def test_a_heading_written_anew_keeps_a_hash_at_its_end() -> None:
    # "\#" shows a "#" that is the heading's text; inside a quote the heading is written
    # anew from its tokens, and a bare " #" at the end would close it instead
    quoted = "> ## " + "0" * 40 + " \\#\n>\n> " + "1" * 40
    assert _shown_in_chunks(quoted, 50) == _shown(quoted)


def test_a_heading_whose_continuation_is_hashes_shows_them() -> None:
    # the continuation "# #" after "## " would be an empty heading closed by " #"
    heading = "## " + "0" * 46 + " # \\#"
    assert _shown_in_chunks(heading, 50) == _shown(heading)


def test_a_continuation_starting_with_a_hash_does_not_become_a_heading() -> None:
    paragraph = "0" * 49 + " # 0000"
    heading = "## " + "0" * 46 + " # 0000"
    for markdown in (paragraph, heading):
        assert chunking.split(markdown, 50)[1].endswith("# 0000")  # the cut is before "#"
        assert _shown_in_chunks(markdown, 50) == _shown(markdown)
    # a paragraph's continuation shown as a heading would be bold on Telegram
    assert "<b>" not in render(chunking.split(paragraph, 50)[1]).html
