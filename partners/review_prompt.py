"""The text a review shows the model: the prompt file (``partners/prompts/review.md``)
filled with the files it may change, the memory budget, the day's journal so far and the new
part of the conversation (the segment), shortened to fit the review's window."""

from __future__ import annotations

from datetime import datetime
from importlib import resources
from zoneinfo import ZoneInfo

from bot.config.memory import MemoryConfig
from bot.store import MessageRow, SessionRow
from partners.journal import summaries_for_chat
from partners.memory import MemoryFile, MemoryStore
from partners.memory_format import strip_ids
from partners.persona import MEMORY_FILES, Partner
from partners.review_edits import shown_name
from partners.review_scene import scene_note_template

CUT_MARKER = "… (earlier part omitted)"
MESSAGE_SHARE = 5
"""One message shows at most this share of the review's window (1/5): a reply longer than
the window (a story in three chunks) would otherwise push every turn before it out, and the
watermark passes those turns whether the model saw them or not."""
CLIPPED_MARKER = " … (shortened)"


def review_prompt_template() -> str:
    return (resources.files("partners") / "prompts" / "review.md").read_text("utf-8")


def segment_text(rows: list[MessageRow], window_chars: int, timezone: ZoneInfo) -> str:
    """The messages as `[HH:MM] Name: text` lines, each shortened to its start past a fifth
    of the window, keeping the tail when still over the window."""
    most = window_chars // MESSAGE_SHARE
    lines = [
        f"[{datetime.fromtimestamp(r.created_at, timezone):%H:%M}] {r.speaker or r.role}: "
        + (r.text if len(r.text) <= most else r.text[:most].rstrip() + CLIPPED_MARKER)
        for r in rows
    ]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        used += len(line) + 1
        if used > window_chars and kept:
            kept.append(CUT_MARKER)
            break
        kept.append(line)
    return "\n".join(reversed(kept))


async def review_prompt(
    memory: MemoryStore,
    partner: Partner,
    session: SessionRow,
    rows: list[MessageRow],
    files: dict[str, MemoryFile],
    *,
    day: str,
    title: str,
    settings: MemoryConfig,
    timezone: ZoneInfo,
    scene: bool = False,
) -> str:
    """The prompt of one review of ``rows``, a segment of ``session`` in the chat ``title``
    on the partner's ``day``, which may change ``files`` (see
    :func:`partners.review_edits.writable_files`); in a ``scene``, written from the partner's
    own point of view (``partners/review_scene.py``)."""
    shown = []
    for label, file in files.items():
        body = strip_ids(await memory.read(file)).strip() or "(empty)"
        shown.append(f"### {shown_name(label, file)}\n{body}")
    allowed = (
        ", ".join(shown_name(label, f) for label, f in files.items())
        or "none (write only the journal)"
    )
    values = {
        "partner": partner.name,
        "allowed": allowed,
        "budget": await _budget_note(memory, partner, settings.context_budget),
        "files": "\n\n".join(shown) or "(none)",
        "journal": await summaries_for_chat(memory, partner, day, session.chat_key)
        or "(nothing yet)",
        "chat": title,
        "segment": segment_text(rows, max(settings.review_chars * 2, 4000), timezone),
        "scene": scene_note_template().replace("{{partner}}", partner.name) if scene else "",
    }
    text = review_prompt_template()
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", value)
    return text


async def _budget_note(memory: MemoryStore, partner: Partner, budget: int) -> str:
    """A line asking to condense the two largest files when the partner's memory is over
    its budget of characters; empty while it fits."""
    sizes = {n: len(await memory.read(MemoryFile(partner.dir, n))) for n in MEMORY_FILES}
    if sum(sizes.values()) <= budget:
        return ""
    heavy = ", ".join(sorted(sizes, key=lambda n: sizes[n], reverse=True)[:2])
    return (
        f"The memory is over its budget of {budget} characters: "
        f"condense {heavy} (merge duplicates, drop what is out of date).\n"
    )
