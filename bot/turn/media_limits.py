"""How much of what a user sends the gateway takes: a voice note no longer than
``speech.max_seconds``, a file no bigger than the channel can download (over a limit, the
user is told what was wrong and what to do instead), and a message's text, typed or
transcribed, cut at :data:`MAX_INBOUND_CHARS` with a note that says so."""

from __future__ import annotations

from bot.events import Media

TOO_LONG = (
    "That voice message is {minutes} long — I can listen to {limit} at most. "
    "Could you send a shorter one, or write it?"
)
TOO_BIG = "That {what} is too big for me to open ({size} MB; the limit is {limit} MB)."
MEGABYTE = 1024 * 1024
MAX_INBOUND_CHARS = 16_000
"""The most text one message brings to the model, typed or spoken."""
CUT_NOTE = "\n[message cut: it was longer than {limit} characters]"


def cut_text(text: str) -> str:
    """``text`` up to :data:`MAX_INBOUND_CHARS`, marked as cut when it was longer."""
    if len(text) <= MAX_INBOUND_CHARS:
        return text
    return text[:MAX_INBOUND_CHARS] + CUT_NOTE.format(limit=MAX_INBOUND_CHARS)


def over_limit(media: Media, max_seconds: float, max_bytes: int | None) -> str | None:
    """What the user is told when ``media`` is over a limit; None when it is within them.
    ``max_bytes``: the channel's download cap (None: it has none)."""
    if media.kind == "voice" and media.seconds is not None and media.seconds > max_seconds:
        return TOO_LONG.format(minutes=duration(media.seconds), limit=duration(max_seconds))
    if max_bytes is not None and media.size is not None and media.size > max_bytes:
        what = "voice message" if media.kind == "voice" else "photo"
        return TOO_BIG.format(
            what=what, size=f"{media.size / MEGABYTE:.0f}", limit=max_bytes // MEGABYTE
        )
    return None


def duration(seconds: float) -> str:
    """``75`` -> "1 min 15 s", as a person says it."""
    minutes, rest = divmod(round(seconds), 60)
    if not minutes:
        return f"{rest} seconds"
    if rest:
        return f"{minutes} min {rest} s"
    return "1 minute" if minutes == 1 else f"{minutes} minutes"
