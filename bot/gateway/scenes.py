"""Scenes at the front door: a group with two or more bound partners (its cast) is a scene.

Who a scene message is for, decided once, before it is stored: every partner it names as a
whole word, the one whose message it replies to, each whose own bot account it @mentions
(Telegram's ``[telegram.bots]``), or the whole cast when it speaks to all of
them ("both of you", "everyone", "大家", "你们": :data:`EVERYONE` by language; a partner whose
``presence`` is ``quiet`` is left out of those), in the order the partners were bound; a
mention of the bot that names nobody goes to the partner ``bot/gateway/addressing.py`` chose
(or the one the speak gate let join, ``bot/gateway/speak_gate.py``), as before. The message is
stored once for the first of them and once more for each of the others (each its own turn on
the scene's one queue key, in that order, so one partner's answer is in the next one's prompt).
A human message also pre-empts the partner-to-partner turns still waiting
(``bot/turn/scene_turns.py`` gives them).

A paused scene (``/admin scene pause``, an override in the store's settings) answers as a
group with several partners did before scenes: the first partner addressed, alone; partners
still hear each other, but never get a turn from each other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.events import Inbound
from bot.gateway.addressing import Named, named_partner
from bot.gateway.speak_score import presence
from bot.store import Store
from bot.workers.queue_keys import scene_key
from partners.persona import Partner

PAUSED_KEY = "scene.paused:{platform}:{chat_id}"
"""The settings row that marks one group's scene paused (its value: who paused it)."""
PARTNER_SPEAKER = "partner:"
"""The ``user_key`` prefix of a partner's words handed to another partner as its turn."""
PREEMPTED = "preempted"
"""The status of a partner-to-partner turn a human message came before."""

EVERYONE: dict[str, tuple[str, ...]] = {
    "english": ("both of you", "all of you", "you both", "you two", "everyone", "everybody"),
    "chinese": ("大家", "你们", "你俩", "两位", "各位"),
    "german": ("ihr beide", "ihr alle", "alle beide"),
    "french": ("vous deux", "vous tous", "tout le monde"),
    "spanish": ("ustedes dos", "los dos", "todos ustedes"),
    "japanese": ("みんな", "二人とも", "皆さん"),
}
"""Words that address the whole cast, by the partners' ``language`` (English and Chinese are
always read: a group's people write them whatever their partners' language)."""
ALWAYS_READ = ("english", "chinese")


def is_scene(cast: Sequence[Named]) -> bool:
    return len(cast) >= 2


def paused_key(platform: str, chat_id: str) -> str:
    return PAUSED_KEY.format(platform=platform, chat_id=chat_id)


async def is_paused(store: Store, platform: str, chat_id: str) -> bool:
    return paused_key(platform, chat_id) in await store.settings()


def speaks_to_all(text: str, languages: Sequence[str]) -> bool:
    """Whether ``text`` addresses everyone present, in any of ``languages`` (whole words for
    spaced scripts; CJK words anywhere)."""
    folded = text.casefold()
    for language in (*ALWAYS_READ, *languages):
        for words in EVERYONE.get(language, ()):
            if words.isascii() or " " in words:
                if re.search(rf"(?<!\w){re.escape(words)}(?!\w)", folded):
                    return True
            elif words in folded:
                return True
    return False


def named_partners(text: str, cast: Sequence[Named]) -> list[str]:
    """Every cast partner named in ``text`` as a whole word, in cast order."""
    return [p.id for p in cast if named_partner(text, [p]) is not None]


async def answering(
    store: Store, inbound: Inbound, cast: Sequence[Partner], chosen: str | None, addressed: bool
) -> tuple[bool, list[str | None]]:
    """Whether a scene message is addressed, and the partners that answer it, in order;
    ``chosen`` is the one ``bot/gateway/addressing.py`` (or the speak gate) chose."""
    languages = [p.preset.language for p in cast]
    if not inbound.late and speaks_to_all(inbound.text, languages):
        addressed = True
    if not addressed:
        return False, [chosen]
    paused = await is_paused(store, inbound.chat.platform, inbound.chat.chat_id)
    replied = await replied_partner(store, inbound)
    return True, [*addressees(inbound, cast, chosen, languages, paused, replied)] or [None]


async def replied_partner(store: Store, inbound: Inbound) -> str | None:
    """The partner whose message ``inbound`` replies to, as the store recorded it sent
    (Telegram says only that the bot wrote it; Discord's webhook names the persona too)."""
    if not inbound.replied_to_bot or inbound.reply_to_message_id is None:
        return None
    reply = await store.reply_for_platform_message(inbound.chat.key, inbound.reply_to_message_id)
    return reply.partner_id if reply is not None else None


def addressees(
    inbound: Inbound,
    cast: Sequence[Partner],
    chosen: str | None,
    languages: Sequence[str],
    paused: bool,
    replied: str | None = None,
) -> list[str]:
    """The partners that answer an addressed scene message, in the order they answer
    (``replied``: the partner whose message it replies to, if known)."""
    if paused or chosen is None:
        return [chosen] if chosen else []
    if speaks_to_all(inbound.text, languages):
        everyone = [p.id for p in cast if presence(p) != "quiet"]
        return everyone or [chosen]
    wanted = set(named_partners(inbound.text, cast))
    if inbound.replied_to_bot and inbound.replied_as is not None:
        wanted |= {p.id for p in cast if p.name == inbound.replied_as}
    wanted |= {p.id for p in cast if p.id == replied or p.id in inbound.addressed_partners}
    if not wanted:
        return [chosen]
    return [p.id for p in cast if p.id in wanted]


async def preempt(store: Store, chat_key: str) -> int:
    """Drop the partner-to-partner turns of a scene that have not started: a person spoke,
    and the partners answer that instead. How many were dropped."""
    dropped = 0
    for row in await store.pending(scene_key(chat_key)):
        if (row.user_key or "").startswith(PARTNER_SPEAKER):
            await store.set_status(row.id, PREEMPTED)
            dropped += 1
    return dropped
