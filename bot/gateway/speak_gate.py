"""The speak gate: whether a partner joins group talk that nobody addressed to it, decided from
what is at hand, with no model call.

A partner's ``presence`` (preset.yml) says how it takes part in a group:

* ``addressed`` (the default): it answers what is addressed to it (its name, a reply to it,
  "everyone"); talk nobody addressed to it is group history, never answered — as before scenes.
* ``quiet``: only its name or a reply to it; "everyone" leaves it out.
* ``lively``: as ``addressed``, and it may join unaddressed talk when its :func:`score` reaches
  :data:`JOIN_AT`: its ``interests`` (preset.yml keywords) in the message, a question, whether
  it spoke last (the talk is with it), how long since any partner answered. Lively partners of
  a group join at most ``scene.max_unaddressed_per_hour`` times an hour, all together (each join
  is an audit row, ``scene join``, so the count holds on every worker and across restarts).

One partner at most joins one message: the best score, the earlier bound on a tie.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from bot.config.model import Config
from bot.events import Inbound
from bot.store import MessageRow, Store
from partners.persona import Partner

JOIN_AT = 3
"""The score at which a lively partner joins."""
INTEREST_POINTS, MAX_INTERESTS = 2, 2
QUESTION_POINTS = 1
LAST_SPEAKER_POINTS = 2
QUIET_GROUP_POINTS, QUIET_GROUP_SECONDS = 1, 600
BUSY_PENALTY, BUSY_SECONDS = 2, 60
RECENT_ROWS = 20
"""How much of the group's latest talk the gate reads."""
JOIN_ACTION = "scene join"
HOUR_SECONDS = 3600


def presence(partner: Partner) -> str:
    value: Any = partner.preset.extra.get("presence", "addressed")
    return str(value)


def interests(partner: Partner) -> list[str]:
    return [str(word) for word in partner.preset.extra.get("interests", ())]


def mentions(text: str, word: str) -> bool:
    """``word`` in ``text``: a whole word in spaced scripts, anywhere in CJK."""
    folded, wanted = text.casefold(), word.casefold()
    if not wanted.isascii() and not any(c == " " for c in wanted):
        return wanted in folded
    return re.search(rf"(?<!\w){re.escape(wanted)}(?!\w)", folded) is not None


def score(partner: Partner, text: str, recent: Sequence[MessageRow], now: float) -> int:
    """How much ``text`` (a message nobody addressed) calls for ``partner``, given the group's
    ``recent`` talk (oldest first)."""
    hits = sum(1 for word in interests(partner) if mentions(text, word))
    points = INTEREST_POINTS * min(hits, MAX_INTERESTS)
    if "?" in text or "？" in text:
        points += QUESTION_POINTS
    answers = [row for row in recent if row.role == "assistant" and row.partner_id]
    if answers and answers[-1].partner_id == partner.id:
        points += LAST_SPEAKER_POINTS
    last_answer = answers[-1].created_at if answers else None
    if last_answer is None or now - last_answer > QUIET_GROUP_SECONDS:
        points += QUIET_GROUP_POINTS
    elif now - last_answer < BUSY_SECONDS:
        points -= BUSY_PENALTY
    return points


class SpeakGate:
    """Chooses the lively partner, if any, that joins a message nobody addressed."""

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store
        self.clock = time.time

    async def joiner(self, inbound: Inbound, cast: Sequence[Partner]) -> str | None:
        """The partner that answers ``inbound``, unaddressed, or None (most groups have no
        lively partner: nothing is read then)."""
        lively = [p for p in cast if presence(p) == "lively"]
        if not lively or not inbound.text.strip():
            return None
        chat = inbound.chat
        recent = await self.store.chat_tail(chat.key, 0, RECENT_ROWS)
        now = inbound.time.timestamp()
        best = max(lively, key=lambda p: (score(p, inbound.text, recent, now), -lively.index(p)))
        if score(best, inbound.text, recent, now) < JOIN_AT:
            return None
        if await self._joins_last_hour(chat.key) >= self.config.scene.max_unaddressed_per_hour:
            return None
        await self.store.audit(f"partner:{best.id}", JOIN_ACTION, chat=chat.key)
        return best.id

    async def _joins_last_hour(self, chat_key: str) -> int:
        cap = self.config.scene.max_unaddressed_per_hour
        since = self.clock() - HOUR_SECONDS
        rows = await self.store.audit_rows(JOIN_ACTION, limit=max(cap, 1) * 50)
        return sum(1 for r in rows if r["time"] >= since and r["detail"].get("chat") == chat_key)
