"""Who is talking where in a turn: the chat, the partner (None: the owner assistant) and the
speaker, resolved once from the last pending message."""

from __future__ import annotations

from dataclasses import dataclass

from bot.gateway.access import OwnerCheck
from bot.store import ChatRow, MessageRow, UserRow
from bot.turn.sessions import Speaker
from partners.catalog import PartnerCatalog
from partners.persona import Partner


@dataclass(frozen=True)
class Conversation:
    """Who is talking where, resolved once per turn."""

    chat: ChatRow
    partner: Partner | None
    speaker: Speaker


async def resolve_conversation(
    catalog: PartnerCatalog,
    is_owner: OwnerCheck,
    last: MessageRow,
    chat: ChatRow | None,
    user: UserRow | None,
) -> Conversation | None:
    """The conversation of a turn, from its last pending message and that message's chat and
    sender as stored (read with the turn's context); None if its chat, user or partner is
    gone. A partner this process does not know is looked up again first: another worker may
    have made it a moment ago."""
    if last.user_key is None or chat is None:
        return None
    partner = None
    if last.partner_id is not None:
        partner = await catalog.find(last.partner_id)
        if partner is None:
            return None
    name = (user["display_name"] if user else "") or last.speaker or "someone"
    speaker = Speaker(last.user_key, name, is_owner(last.user_key))
    return Conversation(chat, partner, speaker)
