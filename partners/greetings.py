"""A partner's greetings: the card's ``first_mes`` and ``alternate_greetings`` (kept in
card.json, ``partners/cards.py``), and which one opens the next conversation.

preset.yml ``greetings:`` chooses between them: ``in_turn`` (the default: the first greeting,
then each alternate in turn, conversation after conversation) or ``random``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Literal

from partners.card_format import MAX_CARD_JSON_BYTES, CardError, parse_json
from partners.persona import CARD_FILE, Partner, fill_placeholders

GreetingOrder = Literal["in_turn", "random"]
_PLACEHOLDERS = re.compile(r"\{\{\s*(char|partner|user)\s*\}\}", re.IGNORECASE)


def greetings_of(partner: Partner) -> list[str]:
    """The partner's greetings, first one first (blocking read; call off-loop). A partner
    without a card, or whose card.json does not read (a hand edit gone wrong: read within the
    cards' bounds), has none; alternates given as one text are one greeting."""
    raw = partner.file(CARD_FILE)
    if raw is None:
        return []
    try:
        side = parse_json(raw, CARD_FILE, MAX_CARD_JSON_BYTES, "")
    except CardError:
        return []
    if not isinstance(side, dict):
        return []
    alternates = side.get("alternate_greetings") or []
    if not isinstance(alternates, list):
        alternates = [alternates]
    found = [side.get("first_mes"), *alternates]
    return [text for text in found if isinstance(text, str) and text.strip()]


def choose(
    greetings: list[str],
    order: GreetingOrder,
    conversations_before: int,
    pick: Callable[[list[str]], str] = random.choice,
) -> str:
    """The greeting for a conversation after ``conversations_before`` earlier ones."""
    if order == "random":
        return pick(greetings)
    return greetings[conversations_before % len(greetings)]


def filled(text: str, partner_name: str, user_name: str) -> str:
    values = {"char": partner_name, "partner": partner_name, "user": user_name}
    return fill_placeholders(text, _PLACEHOLDERS, values, any_case=True)
