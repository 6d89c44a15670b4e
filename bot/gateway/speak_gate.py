"""The speak gate: whether a partner speaks to group talk that nobody addressed to it.

A partner's ``presence`` (preset.yml) says how it takes part in a group:

* ``addressed`` (the default): it answers what is addressed to it (its name, a reply to it,
  "everyone"), and, in a scene (two or more partners), a message that goes on with its own
  last message or asks the room something in its ``interests``.
* ``quiet``: only its name or a reply to it ("everyone" leaves it out), and, in a scene, a
  question that goes on with its own last message.
* ``lively``: as ``addressed``, in any group, and it joins talk about its ``interests`` and open
  questions to the room.

The score (``bot/gateway/speak_score.py``) decides the clear cases, with no model call: most
messages. A case between a presence's ``ASK_AT`` and ``JOIN_AT`` is ambiguous: the gate asks
the model one small yes/no question about that one partner (``partners/prompts/speak_gate.md``;
at most :data:`ANSWER_TOKENS` tokens out, one try, :data:`ASK_TIMEOUT_SECONDS`), at most
``scene.gate_calls_per_hour`` times per group and hour (each call an audit row ``scene gate``,
so the count holds on every worker and across restarts; a call that fails counts too). **When
the hour's calls are spent, or the model fails, times out or answers neither yes nor no, the
partner stays quiet**: the message is group history, as talk nobody addressed always was. A
call's tokens are booked as usage kind ``gate`` for the partner asked about (:meth:`SpeakGate.
book`, the one place to change how they count).

One partner at most speaks to one message. A partner joining talk that is not its own (a
topic, a question to the room) counts against ``scene.max_unaddressed_per_hour`` for the group,
all partners together (each join an audit row ``scene join``); a message that goes on with a
partner's own talk does not: that talk is with it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from importlib import resources

from bot.config.model import Config
from bot.events import Inbound
from bot.gateway.scene_costs import SceneCosts, group_of
from bot.gateway.scenes import speaks_to_all
from bot.gateway.speak_score import Call, interests, presence, read, weigh
from bot.services.llm import Completion, LLMClient, LLMError
from bot.store import MessageRow, Store
from partners.group_talk import group_talk
from partners.persona import Partner

__all__ = ["SpeakGate", "presence"]

logger = logging.getLogger(__name__)

RECENT_ROWS = 20
"""How much of the group's latest talk the gate reads."""
JOIN_ACTION = "scene join"
ASK_ACTION = "scene gate"
HOUR_SECONDS = 3600
ANSWER_TOKENS = 3
ASK_TIMEOUT_SECONDS = 5.0
"""How long a receiving message waits for the model's yes or no (the channel's next messages
wait with it)."""
SHOWN_ROWS, SHOWN_CHARS = 8, 300
"""The talk the model is shown: the latest messages, each cut to this length."""
PRESENCE_WORDS = {
    "lively": "It joins conversations it has something to say about.",
    "addressed": "It speaks when it is spoken to.",
    "quiet": "It speaks only when it is asked something directly.",
}
YES = re.compile(r"^\W*(yes|y|是|对|要|会|はい)", re.IGNORECASE)


class SpeakGate:
    """Chooses the partner, if any, that speaks to a message nobody addressed."""

    def __init__(self, config: Config, store: Store, llm: LLMClient | None = None) -> None:
        self.config = config
        self.store = store
        self.llm = llm
        """Asked about ambiguous cases; None: they stay quiet."""
        self.clock = time.time
        self.timeout = ASK_TIMEOUT_SECONDS

    async def joiner(self, inbound: Inbound, cast: Sequence[Partner]) -> str | None:
        """The partner that answers ``inbound``, unaddressed, or None (a group with one partner
        that is not lively: nothing is read)."""
        if not inbound.text.strip():
            return None
        if len(cast) < 2 and not any(presence(p) == "lively" for p in cast):
            return None
        if len(cast) >= 2 and speaks_to_all(inbound.text, [p.preset.language for p in cast]):
            return None  # the scene answers it with the whole cast (bot/gateway/scenes.py)
        chat = inbound.chat
        recent = await self.store.chat_tail(chat.key, 0, RECENT_ROWS)
        reading = read(
            inbound.text,
            inbound.sender.display_name,
            inbound.reply_to_message_id is not None and not inbound.replied_to_bot,
            recent,
            inbound.time.timestamp(),
        )
        verdict = weigh(cast, reading)
        partner = next((p for p in cast if p.id == verdict.partner_id), None)
        if verdict.call is Call.STAY or partner is None:
            return None
        own = reading.talk is not None and reading.talk.partner_id == partner.id
        cap = self.config.scene.max_unaddressed_per_hour
        if not own and await self._last_hour(JOIN_ACTION, chat.key) >= cap:
            return None
        if verdict.call is Call.ASK and not await self.ask(partner, inbound, recent, cast):
            return None
        if not own:
            await self.store.audit(f"partner:{partner.id}", JOIN_ACTION, chat=chat.key)
        logger.info("%s: %s speaks unaddressed (%s)", chat.key, partner.id, verdict.call.value)
        return partner.id

    async def ask(
        self,
        partner: Partner,
        inbound: Inbound,
        recent: Sequence[MessageRow],
        cast: Sequence[Partner],
    ) -> bool:
        """Whether the model says ``partner`` should answer ``inbound``: True only on a yes;
        False when the group's calls this hour are spent, or the model fails or is slow."""
        chat_key = inbound.chat.key
        if self.llm is None:
            return False
        if await self._last_hour(ASK_ACTION, chat_key) >= self.config.scene.gate_calls_per_hour:
            return False
        await self.store.audit(f"partner:{partner.id}", ASK_ACTION, chat=chat_key)
        try:
            async with asyncio.timeout(self.timeout):
                completion = await self.llm.complete(
                    question(partner, recent, inbound),
                    max_tokens=ANSWER_TOKENS,
                    time_limit=self.timeout,
                    max_retries=0,
                )
        except (LLMError, TimeoutError) as exc:
            logger.warning(
                "speak gate in %s: the model gave no answer (%s); %s stays quiet",
                chat_key, exc or "timed out", partner.id,
            )  # fmt: skip
            return False
        await self.book(partner, completion, inbound, cast)
        return YES.match(completion.text) is not None

    async def book(
        self, partner: Partner, completion: Completion, inbound: Inbound, cast: Sequence[Partner]
    ) -> None:
        """Count a gate call's tokens: usage kind ``gate``, on the partner asked about and on
        the group's day (its ``scene.daily_token_budget``)."""
        costs = SceneCosts(self.config, self.store)
        costs.clock = self.clock
        await costs.book_gate(
            group_of(inbound.chat.platform, inbound.chat.chat_id),
            cast,
            partner.id,
            completion.model,
            completion.usage.prompt_tokens,
            completion.usage.completion_tokens,
        )

    async def _last_hour(self, action: str, chat_key: str) -> int:
        """Audit rows of ``action`` in this group in the last hour."""
        since = self.clock() - HOUR_SECONDS
        rows = await self.store.audit_rows(action, limit=500)
        return sum(1 for r in rows if r["time"] >= since and r["detail"].get("chat") == chat_key)


def question(
    partner: Partner, recent: Sequence[MessageRow], inbound: Inbound
) -> list[dict[str, str]]:
    """The one small question: should ``partner`` answer ``inbound``, after ``recent``?"""
    lines = [f"{speaker_of(row)}: {cut(row.text)}" for row in group_talk(recent)[-SHOWN_ROWS:]]
    lines.append(f"{inbound.sender.display_name}: {cut(inbound.text)}")
    words = interests(partner)
    values = {
        "{name}": partner.name,
        "{presence}": PRESENCE_WORDS.get(presence(partner), ""),
        "{interests}": f"Its interests: {', '.join(words)}." if words else "",
        "{talk}": "\n".join(lines),
    }
    text = prompt_text()
    for key, value in values.items():
        text = text.replace(key, value)
    return [{"role": "user", "content": text}]


def speaker_of(row: MessageRow) -> str:
    if row.role == "assistant":
        return f"{row.speaker} (partner)"
    return row.speaker


def cut(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARS else flat[: SHOWN_CHARS - 1] + "…"


def prompt_text() -> str:
    return (resources.files("partners") / "prompts" / "speak_gate.md").read_text("utf-8")
