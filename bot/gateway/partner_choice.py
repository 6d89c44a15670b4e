"""Which partner a DM talks with: the one its user chose, else the configured default (or
the only public partner); the owner's assistant for the owner; else the user is asked. A
chosen partner that is gone (deleted, or its settings broken) is said so, once, instead of
answering as another. Groups choose among their bound partners
(``bot/gateway/addressing.py``)."""

from __future__ import annotations

import logging

from bot.config.model import Config
from bot.delivery.notices import Notices
from bot.events import ChatRef, Choice, Inbound
from bot.store import ChatRow, Store
from partners.catalog import PartnerCatalog
from partners.persona import Partner

logger = logging.getLogger(__name__)

PARTNER_GONE = (
    "The partner you were talking with ({partner}) is no longer here, so nobody else read "
    "that message. Choose who to talk with, then write again."
)
"""Said once to a user whose chosen partner was deleted, instead of answering as another."""
PARTNER_UNAVAILABLE = (
    "The partner you are talking with ({partner}) cannot answer right now (its settings do "
    "not load); the owner can fix it. Write again later, or choose another."
)
"""Said while the partner a user chose is there but does not load (a broken preset.yml)."""
ASK = "Who would you like to talk with? Pick a partner, then write again."
NONE_YET = "There is no partner to talk with yet. The owner needs to create one."


class PartnerChoice:
    def __init__(
        self, config: Config, store: Store, catalog: PartnerCatalog, notices: Notices
    ) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.notices = notices

    async def bound(self, chat: ChatRef) -> list[Partner]:
        """The partners bound to a group chat (those that exist), in binding order."""
        rows = await self.store.bindings(chat.platform, chat.chat_id)
        partners = [await self.catalog.find(row["partner_id"]) for row in rows]
        return [p for p in partners if p is not None]

    async def for_dm(self, chat: ChatRow, is_owner: bool) -> str | None | bool:
        """The partner of a DM; None is the owner's assistant; False means "ask the user"."""
        selected = chat.selected_partner
        if selected and await self.catalog.find(selected):
            return selected
        if is_owner:
            return None
        default = self.default()
        return False if default is None else default.id

    def default(self) -> Partner | None:
        wanted = self.config.partners.default
        if wanted and (partner := self.catalog.get(wanted)):
            return partner
        public = self.catalog.public()
        return public[0] if len(public) == 1 else None

    async def current(self, chat: ChatRef, is_owner: bool) -> Partner | None:
        """Who this DM talks with (selected, else the default); None in groups."""
        row = await self.store.chat(chat.key) if chat.is_dm else None
        if row is None:
            return None
        partner_id = await self.for_dm(row, is_owner)
        return self.catalog.get(partner_id) if isinstance(partner_id, str) else None

    async def gone(self, inbound: Inbound, chat: ChatRow) -> bool:
        """The partner this DM chose no longer exists (deleted, on whichever worker): the
        message is not passed on to someone else; the user is told, once (the choice is
        cleared, so their next message goes where a new chat's would), and asked to choose.
        True if so."""
        selected = chat.selected_partner
        if not selected or await self.catalog.find(selected) is not None:
            return False
        broken = selected in self.catalog.errors
        if not broken:
            await self.store.select_partner(chat.chat_key, None)
        logger.info(
            "chat %s: its partner %s is not there; the user was told", chat.chat_key, selected
        )
        choices = self._choices()
        text = (PARTNER_UNAVAILABLE if broken else PARTNER_GONE).format(partner=selected)
        if not choices:
            text += " There is no other partner to talk with yet."
        await self.notices.reply(inbound.chat, text, inbound.message_id, choices)
        return True

    async def ask(self, inbound: Inbound) -> None:
        choices = self._choices()
        text = ASK if choices else NONE_YET
        await self.notices.reply(inbound.chat, text, inbound.message_id, choices)

    def _choices(self) -> tuple[Choice, ...]:
        return tuple(Choice(p.name, f"/partner {p.id}") for p in self.catalog.public())
