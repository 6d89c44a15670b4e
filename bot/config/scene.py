"""``[scene]``: how the partners bound to one group talk there together (docs/scenes.md).

A group with two or more bound partners is a scene: a human message is answered by every
partner it addresses, one turn each, and a partner's reply that names another gives that one
a turn, within these bounds, so partners can never talk among themselves without end."""

from __future__ import annotations

from pydantic import Field

from bot.config.section import Section


class SceneConfig(Section):
    max_partner_turns: int = Field(3, ge=0, le=20)
    """Partner turns that one partner's words may give another, after one human message
    (0: partners answer people only)."""
    max_turns_per_partner: int = Field(2, ge=1, le=10)
    """Replies one partner gives after one human message, its answer to the human included."""
    max_unaddressed_per_hour: int = Field(4, ge=0, le=60)
    """Times an hour the partners of a group join talk nobody addressed to them that is not
    their own (a topic in their interests, a question to the room), all together (0: never)."""
    gate_calls_per_hour: int = Field(6, ge=0, le=120)
    """Times an hour the speak gate of one group may ask the model whether a partner should
    speak, when the score alone cannot tell (0: never; the partner then stays quiet)."""
    daily_token_budget: int = Field(0, ge=0)
    """Tokens one group's scene may spend a day (its turns and speak-gate calls, on the
    calendar of its first bound partner) before its partners stop answering each other and
    talk nobody addressed; messages addressed to them are still answered (0: no budget;
    ``bot/gateway/scene_costs.py``)."""
