"""Scenes in a turn: what a partner hears of the others, and the turns partners give each other.

**Hearing.** A scene partner's prompt shows the group's conversation since its own history
window — what people said to anyone and what the other partners answered, under their names —
as group history: messages of the group only, never anyone's DM or per-user memory (those
never reach a group prompt), and never another partner's memory (only what it said aloud). What
was said after the message a turn answers (another partner answering it first) follows that
message, so the partner reads the conversation in the order it happened.

**Partner to partner.** A partner's reply that names another cast partner as a whole word gives
that partner a turn: the reply, under its speaker's name, waits for it on the scene's one key.
After one human message at most ``scene.max_partner_turns`` turns go from partner to partner,
each partner replies at most ``scene.max_turns_per_partner`` times (its answer to the human
included), and no partner hands the turn to the same partner twice, so no chain loops. A human
message in between pre-empts the turns still waiting (``bot/gateway/scenes.py``); a paused
scene gives none, nor does one whose group has spent its daily token budget
(``bot/gateway/scene_costs.py``; a scene turn's tokens are booked there too, kind ``scene``).

A hand-over is recorded in the transaction that records the reply giving it: a crash keeps
both or neither, and a turn tried again gives the same hand-over once (its dedup key names the
turn's last message, the giver and the partner given the turn).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.config.model import Config
from bot.gateway.scene_costs import SceneCosts, group_of
from bot.gateway.scenes import PARTNER_SPEAKER, PREEMPTED, is_paused, named_partners
from bot.store import ChatRow, MessageRow, NewMessage, NewUsage, Store
from bot.turn.conversation import Conversation
from bot.turn.sessions import audience_for
from bot.workers.queue_keys import scene_key
from partners.catalog import PartnerCatalog
from partners.persona import Partner

logger = logging.getLogger(__name__)

TAIL_ROWS = 60
"""How far back a chain is read to find the human message it follows."""
UNHEARD = ("pending", "failed", PREEMPTED)


@dataclass
class Chain:
    """What followed the latest human message of a scene."""

    human_id: int = 0
    replies: dict[str, int] = field(default_factory=dict)
    """Replies (recorded or waiting as a turn) per partner since that message."""
    handovers: set[tuple[str, str]] = field(default_factory=set)
    """(from partner, to partner) turns given since."""
    waiting: set[str] = field(default_factory=set)
    """Partners with a turn still waiting (another would only join it)."""


def group_of_chat(chat: ChatRow) -> str:
    return group_of(chat.platform, chat.platform_chat_id)


def giver_of(row: MessageRow) -> str | None:
    """The partner whose words ``row`` hands to another as its turn, if it is such a row."""
    key = row.user_key or ""
    return key.removeprefix(PARTNER_SPEAKER) if key.startswith(PARTNER_SPEAKER) else None


def heard(
    rows: Sequence[MessageRow], partner_id: str, own: Sequence[MessageRow]
) -> list[MessageRow]:
    """What ``partner_id`` hears of ``rows`` (a group's conversation, oldest first): the
    others' words, each once; not its own, nor what its own turns already show (``own``)."""
    seen: set[tuple[str | None, str | None]] = {
        (r.platform_message_id, r.user_key) for r in own if r.platform_message_id
    }
    said = {(r.speaker, r.text) for r in own}
    kept: list[MessageRow] = []
    for row in rows:
        if row.status in UNHEARD or giver_of(row) is not None:
            continue
        if row.role != "context" and row.partner_id == partner_id:
            continue
        voice = (row.platform_message_id, row.user_key)
        if (row.platform_message_id and voice in seen) or (row.speaker, row.text) in said:
            continue
        if row.platform_message_id:
            seen.add(voice)  # a message for several partners is stored once for each
        kept.append(row)
    return kept


async def scene_context(
    store: Store, partner_id: str, chat_key: str, since: int, own: Sequence[MessageRow], limit: int
) -> tuple[list[MessageRow], list[MessageRow]]:
    """The group history a scene partner reads: (before the messages its turn answers,
    after them)."""
    if limit == 0:
        return [], []
    rows = heard(await store.chat_tail(chat_key, since, limit * 2), partner_id, own)[-limit:]
    first = min((row.id for row in own if row.status == "pending"), default=None)
    if first is None:
        return rows, []
    return [r for r in rows if r.id < first], [r for r in rows if r.id > first]


def chain_since_human(rows: Sequence[MessageRow]) -> Chain:
    """The chain after the latest human message among ``rows`` (oldest first); a message
    stored once for each partner it addresses is one message."""
    chain, voice = Chain(), None
    for row in rows:
        giver = giver_of(row)
        if row.role in ("user", "context") and giver is None:
            if (row.platform_message_id, row.user_key) != voice or not row.platform_message_id:
                chain, voice = Chain(human_id=row.id), (row.platform_message_id, row.user_key)
            if row.status == "pending" and row.partner_id:  # an answer still to come
                chain.replies[row.partner_id] = chain.replies.get(row.partner_id, 0) + 1
                chain.waiting.add(row.partner_id)
        elif row.role == "assistant" and row.partner_id:
            chain.replies[row.partner_id] = chain.replies.get(row.partner_id, 0) + 1
        elif giver is not None and row.partner_id and row.status != PREEMPTED:
            chain.handovers.add((giver, row.partner_id))
            if row.status == "pending":
                chain.replies[row.partner_id] = chain.replies.get(row.partner_id, 0) + 1
                chain.waiting.add(row.partner_id)
    return chain


class SceneTurns:
    """Gives partners turns from each other's replies, within the scene's bounds."""

    def __init__(self, config: Config, store: Store, catalog: PartnerCatalog) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.costs = SceneCosts(config, store)

    async def booked(self, chat: ChatRow, usage: NewUsage) -> NewUsage:
        """A scene turn's tokens as they are booked: kind ``scene``, on its group too."""
        cast = await self._cast(chat.platform, chat.platform_chat_id)
        return self.costs.scene_usage(usage, group_of_chat(chat), cast)

    async def handovers(
        self,
        conversation: Conversation,
        answered: Sequence[MessageRow],
        text: str,
        usage: NewUsage | None,
    ) -> list[NewMessage]:
        """The turns ``text`` (the reply to ``answered``, about to be recorded with the
        tokens it cost, ``usage``) hands to the cast partners it names, within bounds:
        recorded in the reply's own transaction (``Store.finish_turn``'s ``follow``), so a
        crash keeps both or neither."""
        chat, partner = conversation.chat, conversation.partner
        if partner is None or not text:
            return []
        if await is_paused(self.store, chat.platform, chat.platform_chat_id):
            return []
        cast = await self._cast(chat.platform, chat.platform_chat_id)
        named = named_partners(text, [p for p in cast if p.id != partner.id])
        spending = usage.prompt_tokens + usage.completion_tokens if usage else 0
        if not named or await self.costs.exhausted(group_of_chat(chat), cast, spending):
            return []
        chain = chain_since_human(await self.store.chat_tail(chat.chat_key, 0, TAIL_ROWS))
        answered_upto = max(row.id for row in answered)
        if chain.human_id > answered_upto:
            return []  # a person spoke since: they are answered instead
        given = self._within_bounds(partner.id, named, chain)
        if given:
            logger.info("scene %s: %s hands the turn to %s", chat.chat_key, partner.id, given)
        return [self._handover(conversation, answered_upto, text, other) for other in given]

    def _within_bounds(self, giver: str, named: list[str], chain: Chain) -> list[str]:
        settings = self.config.scene
        turns = len(chain.handovers)
        given = []
        for other in named:
            if turns >= settings.max_partner_turns:
                break
            if (giver, other) in chain.handovers or other in chain.waiting:
                continue  # the same hand-over twice after one human message is a loop
            if chain.replies.get(other, 0) >= settings.max_turns_per_partner:
                continue
            chain.handovers.add((giver, other))
            chain.waiting.add(other)
            chain.replies[other] = chain.replies.get(other, 0) + 1
            given.append(other)
            turns += 1
        return given

    def _handover(
        self, conversation: Conversation, answered_upto: int, text: str, other: str
    ) -> NewMessage:
        chat, partner = conversation.chat, conversation.partner
        assert partner is not None
        return NewMessage(
            chat_key=chat.chat_key,
            role="user",
            text=text,
            audience=audience_for(chat, conversation.speaker),
            status="pending",
            dedup_key=f"scene:{answered_upto}:{partner.id}:{other}",
            queue_key=scene_key(chat.chat_key),
            partner_id=other,
            user_key=f"{PARTNER_SPEAKER}{partner.id}",
            speaker=partner.name,
        )

    async def _cast(self, platform: str, chat_id: str) -> list[Partner]:
        rows = await self.store.bindings(platform, chat_id)
        found = [await self.catalog.find(row["partner_id"]) for row in rows]
        return [p for p in found if p is not None]
