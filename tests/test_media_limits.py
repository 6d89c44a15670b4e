"""What a user is told when a voice note or photo is over what the gateway fetches
(bot/turn/media_limits.py): the limit, what they sent, and what to do instead."""

from __future__ import annotations

from bot.events import Media
from bot.turn.media_limits import duration, over_limit

MB = 1024 * 1024


def test_within_both_limits_nothing_is_said() -> None:
    voice = Media("voice", "file-1", seconds=60, size=2 * MB)
    assert over_limit(voice, max_seconds=60, max_bytes=20 * MB) is None
    assert over_limit(Media("photo", "file-2"), max_seconds=60, max_bytes=None) is None


def test_a_voice_note_too_long_names_its_length_the_limit_and_what_to_do() -> None:
    text = over_limit(Media("voice", "f", seconds=75), max_seconds=60, max_bytes=None)
    assert text is not None
    assert "1 min 15 s long" in text and "1 minute at most" in text and "write it" in text


def test_a_file_over_the_channels_download_cap_names_both_sizes() -> None:
    text = over_limit(Media("photo", "f", size=25 * MB), max_seconds=60, max_bytes=20 * MB)
    assert text == "That photo is too big for me to open (25 MB; the limit is 20 MB)."
    voice = over_limit(Media("voice", "f", seconds=10, size=21 * MB), 60, 20 * MB)
    assert voice is not None and voice.startswith("That voice message is too big")


def test_durations_read_as_a_person_says_them() -> None:
    assert [duration(s) for s in (45, 60, 75, 1800)] == [
        "45 seconds",
        "1 minute",
        "1 min 15 s",
        "30 minutes",
    ]
