"""How much a group message nobody addressed calls for each partner: the speak gate's reading
and score (``bot/gateway/speak_gate.py`` acts on them), from the message, the group's latest
talk and each partner's preset, with no model call and no I/O.

What is read of the message, once for all partners (:func:`read`):

* **for a person**: a reply to a person's message, an ``@handle``, a person of the group named
  first or last ("Bob, …", "… , Alice?"), a capitalised name and a comma first ("Tom, …"), or
  the next line of a talk between people (one named the other, or the sender's own last line
  named someone). Nobody speaks then.
* **the talk it goes on with**: the partner whose message is the latest any partner said, if
  it is fresh (:data:`FRESH_SECONDS`) and at most :data:`MAX_BETWEEN` messages came since ("ok",
  "brb" do not count; one to someone by name ends it). The message is *close* to that talk
  when it comes right after it from the person it answered (or after a message the partner
  began, or one that asked something), or shares a word with it; else it may be the start of
  something else.
* **a question** ("?", a question word first, a Chinese question particle) or a request ("tell
  us"), **a bare acknowledgement** ("ok thanks!", "好的明白了": nothing to answer), **plans
  among the people** ("who's coming?", "几点集合？": only they can answer; "brb, making tea":
  said in passing), whether it says enough to be about something, and each partner's
  ``interests`` (whole words and their English forms; Chinese and Japanese words anywhere).

Each partner's score then counts what its ``presence`` lets it hear (:func:`score`):

* ``quiet``: a question or request in its own close talk, nothing else.
* ``addressed``: its own talk (not a bare acknowledgement); a question to the room in its
  interests.
* ``lively``: as ``addressed``, and its interests in any message, and an open question to the
  room in no other partner's interests; another partner's talk holds it back.

Outside a scene (one partner) only a lively partner is weighed.

:func:`weigh` turns the scores into one call: the partner furthest past its presence's
:data:`JOIN_AT` joins; else one at :data:`ASK_AT` or more is *ambiguous* (the gate may ask the
model); else nobody speaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from bot.gateway.speak_words import (
    PLANS,
    REQUEST,
    is_bare,
    is_question,
    keywords,
    mentions,
    names_first_or_last,
    names_someone,
)
from bot.store import MessageRow
from partners.group_talk import group_talk
from partners.persona import Partner

FRESH_SECONDS = 600
"""How long a partner's last message keeps the talk with it."""
MAX_BETWEEN = 2
"""Messages after a partner's last one past which the talk has moved on."""

OWN_CLOSE, OWN_LOOSE = 4, 1
"""Points for a message that goes on with the partner's own talk (close to it, or loosely)."""
OTHER_CLOSE = -3
"""Points for a message that goes on with another partner's talk (lively partners only)."""
INTEREST_POINTS, MAX_INTERESTS = 3, 2
QUESTION_POINTS = 1
ROOM_POINTS = 2
"""An open question to the room with something in it, not for a person, not plans among the
people, in no other partner's interests (lively partners only)."""
BUSY_POINTS, BUSY_SECONDS = 1, 60
"""Another partner spoke this recently: a lively partner lets the people talk."""
PLANS_POINTS = 2
"""Plans among the people, or someone stepping away: not the partners' to answer."""
JOIN_AT = {"lively": 3, "addressed": 4, "quiet": 5}
ASK_AT = {"lively": 2, "addressed": 3, "quiet": 5}
"""From here up to ``JOIN_AT`` a partner's case is ambiguous."""


class Call(Enum):
    STAY = "stay"
    ASK = "ask"
    JOIN = "join"


@dataclass(frozen=True)
class Talk:
    """The partner talk a message may go on with."""

    partner_id: str
    close: bool
    recent: bool
    """The partner spoke within :data:`BUSY_SECONDS`."""


@dataclass(frozen=True)
class Reading:
    """What the gate reads of one message nobody addressed, the same for every partner."""

    text: str
    for_person: bool
    question: bool
    request: bool
    bare: bool
    plans: bool
    substance: bool
    """Two or more words that say what it is about (not "which place?")."""
    talk: Talk | None


@dataclass(frozen=True)
class Verdict:
    partner_id: str | None
    call: Call
    score: int = 0


def presence(partner: Partner) -> str:
    value: Any = partner.preset.extra.get("presence", "addressed")
    return str(value)


def interests(partner: Partner) -> list[str]:
    return [str(word) for word in partner.preset.extra.get("interests", ())]


def read(
    text: str,
    sender: str,
    replies_to_person: bool,
    recent: Sequence[MessageRow],
    now: float,
) -> Reading:
    """What ``text`` (from ``sender``, a display name) is, after the group's ``recent`` talk
    (oldest first; a message stored once per partner counts once)."""
    rows = group_talk(recent)  # each message once
    people = {row.speaker for row in rows if not _is_partner(row) and row.speaker != sender}
    for_person = (
        replies_to_person or names_someone(text, people) or _between_people(rows, sender, now)
    )
    return Reading(
        text=text,
        for_person=for_person,
        question=is_question(text),
        request=REQUEST.search(text) is not None,
        bare=is_bare(text),
        plans=PLANS.search(text) is not None,
        substance=len(keywords(text)) >= 2,
        talk=_partner_talk(rows, text, sender, now),
    )


def hits(partner: Partner, text: str) -> int:
    return sum(1 for word in interests(partner) if mentions(text, word))


def score(partner: Partner, reading: Reading, cast: Sequence[Partner] = ()) -> int:
    """How much ``reading`` calls for ``partner``, as its ``presence`` hears it, among ``cast``
    (the group's partners: outside a scene only a lively partner is weighed): the more of
    going on with its own talk and of a topic for it."""
    kind = presence(partner)
    if reading.for_person or (kind != "lively" and len(cast) < 2):
        return 0
    talk, asks = reading.talk, reading.question or reading.request
    own = talk is not None and talk.partner_id == partner.id
    follows = 0
    if own and talk is not None and not reading.bare:
        follows = (OWN_CLOSE if talk.close else OWN_LOOSE) + (QUESTION_POINTS if asks else 0)
    if kind == "quiet":
        return follows if asks else 0
    return max(follows, topic(partner, reading, cast, own))


def topic(partner: Partner, reading: Reading, cast: Sequence[Partner], own: bool) -> int:
    """How much the message is a topic for ``partner`` (addressed: a question to the room in
    its interests; lively: its interests, or an open question in nobody else's)."""
    mine = hits(partner, reading.text)
    talk = reading.talk
    close_talk = talk is not None and talk.close
    room = reading.question and not reading.plans and not close_talk and reading.substance
    if presence(partner) == "addressed":
        return INTEREST_POINTS + QUESTION_POINTS + 1 if room and mine else 0
    points = INTEREST_POINTS * min(mine, MAX_INTERESTS)
    if reading.question:
        points += QUESTION_POINTS
    if room and not any(hits(p, reading.text) for p in cast if p.id != partner.id):
        points += ROOM_POINTS
    if talk is not None and not own:
        points += OTHER_CLOSE if talk.close else -BUSY_POINTS if talk.recent else 0
    if reading.plans:
        points -= PLANS_POINTS
    return min(points, 0) if reading.bare else points


def weigh(cast: Sequence[Partner], reading: Reading) -> Verdict:
    """The partner that speaks (JOIN), the one the model may be asked about (ASK), or nobody
    (STAY): the furthest past its presence's mark, the earlier bound on a tie."""
    best: Verdict = Verdict(None, Call.STAY)
    best_margin = -1_000
    for partner in cast:
        kind = presence(partner)
        points = score(partner, reading, cast)
        if kind not in JOIN_AT or points < ASK_AT[kind]:
            continue
        margin = points - JOIN_AT[kind]
        if margin > best_margin:
            call = Call.JOIN if margin >= 0 else Call.ASK
            best, best_margin = Verdict(partner.id, call, points), margin
    return best


def _is_partner(row: MessageRow) -> bool:
    return row.role == "assistant" and row.partner_id is not None


def _between_people(rows: Sequence[MessageRow], sender: str, now: float) -> bool:
    """The message is the next line of a fresh talk between the sender and another person:
    the last message is that person's, and one of the two named the other; or the last
    message is the sender's own, to someone by name."""
    if not rows or _is_partner(rows[-1]) or now - rows[-1].created_at > FRESH_SECONDS:
        return False
    other = rows[-1].speaker
    if other == sender:  # the sender goes on with what they said to someone by name
        return names_someone(rows[-1].text, set())
    if names_first_or_last(rows[-1].text, sender):
        return True
    if len(rows) >= 2 and not _is_partner(rows[-2]) and rows[-2].speaker == sender:
        return names_first_or_last(rows[-2].text, other)
    return False


def _partner_talk(rows: Sequence[MessageRow], text: str, sender: str, now: float) -> Talk | None:
    index = next((i for i in range(len(rows) - 1, -1, -1) if _is_partner(rows[i])), None)
    if index is None:
        return None
    said = rows[index]
    # "brb", "haha" between do not move the talk on; a message to someone by name does
    after = [row for row in rows[index + 1 :] if not (is_bare(row.text) or PLANS.search(row.text))]
    if now - said.created_at > FRESH_SECONDS or len(after) > MAX_BETWEEN:
        return None
    if any(names_someone(row.text, set()) for row in after):
        return None
    between = len(after)
    asked = rows[index - 1] if index > 0 else None
    shares = bool(keywords(text) & keywords(said.text))
    right_after = between == 0 and (
        asked is None  # the partner spoke first
        or now - asked.created_at > FRESH_SECONDS
        or (not _is_partner(asked) and asked.speaker == sender)
        or is_question(said.text)
    )
    assert said.partner_id is not None
    return Talk(said.partner_id, right_after or shares, now - said.created_at <= BUSY_SECONDS)
