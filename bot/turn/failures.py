"""Turns that raise: each failure is counted against its messages, which run again, and the
third closes them with one apology and an audit row (docs/architecture.md: nothing stays pending
forever)."""

from __future__ import annotations

import logging

from bot.delivery.reply import PendingReply
from bot.delivery.sender import Delivery
from bot.events import storable
from bot.store import Lease, MessageRow, NewMessage, Store
from partners.catalog import PartnerCatalog

logger = logging.getLogger(__name__)

TURN_FAILED = (
    "Sorry — something went wrong on my side with that message and I couldn't answer it. "
    "Please try again, perhaps in other words."
)
MAX_TURN_ATTEMPTS = 3
"""Turns that raise before a message is given up (docs/architecture.md: nothing stays pending
forever)."""
ERROR_DETAIL_CHARS = 300


async def failed_attempt(
    store: Store,
    catalog: PartnerCatalog,
    delivery: Delivery,
    pending: list[MessageRow],
    exc: Exception,
    *,
    lease: Lease | None = None,
) -> None:
    """Count a failed turn against its messages; give them up after the last attempt."""
    attempts = await store.count_failed_turn([row.id for row in pending], lease=lease)
    if attempts == 0:  # the reply was recorded before it failed: nothing is left pending
        return
    if attempts < MAX_TURN_ATTEMPTS:
        logger.warning("turn attempt %d of %d failed; trying again", attempts, MAX_TURN_ATTEMPTS)
        return
    await give_up(store, catalog, delivery, pending, attempts, exc, lease=lease)


async def give_up(
    store: Store,
    catalog: PartnerCatalog,
    delivery: Delivery,
    pending: list[MessageRow],
    attempts: int,
    exc: Exception,
    *,
    lease: Lease | None = None,
) -> None:
    """Close the messages as failed, apologise once and leave an audit row."""
    ids = [row.id for row in pending]
    last = pending[-1]
    partner = catalog.get(last.partner_id) if last.partner_id else None
    apology = NewMessage(
        chat_key=last.chat_key,
        role="notice",
        text=TURN_FAILED,
        audience=last.audience,
        status="delivering",
        partner_id=last.partner_id,
        speaker=partner.name if partner else "assistant",
    )
    # No session: messages that broke three turns stay out of the history, or they could
    # break every later turn of the chat too.
    reply_id = await store.finish_turn(ids, None, apology, "failed", lease=lease)
    await store.audit(
        "gateway",
        "turn_failed",
        chat=last.chat_key,
        messages=ids,
        attempts=attempts,
        error=storable(f"{type(exc).__name__}: {exc}")[:ERROR_DETAIL_CHARS],
    )
    chat = await store.chat(last.chat_key)
    if chat is not None:
        answered = last.platform_message_id
        await delivery.send(
            PendingReply(reply_id, chat, TURN_FAILED, last.partner_id, answered, lease=lease)
        )
