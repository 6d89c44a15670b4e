"""The web page's changes, made by running the owner's ``/admin`` commands.

The page has no rules of its own: approving a pairing, forgetting an entry, undoing a change,
creating or deleting a partner all run the very handler the chat command runs, through
:func:`bot.admin.table.run_admin`, which checks the arguments, writes the one audit row and answers.
The owner appears there as ``web:owner`` — the audit log's record that a change came from the
web page.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.admin.services import AdminServices
from bot.admin.table import run_admin
from bot.commands.types import CommandContext, CommandReply
from bot.config.model import Config
from bot.delivery.notices import Notices
from bot.events import ChatRef, Inbound, Sender
from bot.gateway.access import Access
from bot.store import Store
from bot.text.literal import unescape
from bot.turn.sessions import Sessions
from partners.catalog import PartnerCatalog
from partners.user_memory import UserMemory

logger = logging.getLogger(__name__)

WEB_PLATFORM = "web"
WEB_OWNER = Sender(WEB_PLATFORM, "owner", "owner (web page)")
WEB_CHAT = ChatRef(WEB_PLATFORM, "owner", "dm")
WEB_ACTOR = WEB_OWNER.key
"""The audit log's actor for everything done on the web page."""


@dataclass(frozen=True)
class OwnerReach:
    """What a command run from the page reaches, as it does from the owner's chat."""

    admin: AdminServices
    sessions: Sessions
    notices: Notices
    user_memory: UserMemory


class OwnerActions:
    def __init__(
        self,
        config: Config,
        store: Store,
        catalog: PartnerCatalog,
        access: Access,
        owner: OwnerReach,
    ) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.access = access
        self.owner = owner
        self.admin = owner.admin

    async def run(self, *args: str) -> str:
        """``/admin <args>`` as the owner; the answer as plain text (the page escapes it)."""
        return (await self.reply(*args)).text

    async def reply(self, *args: str) -> CommandReply:
        """``/admin <args>`` as the owner: the whole answer, its file included."""
        inbound = Inbound(WEB_CHAT, WEB_OWNER, "web", " ".join(args), datetime.now(UTC))
        await self.catalog.refresh()  # it may name a partner another worker just made
        ctx = CommandContext(
            config=self.config,
            store=self.store,
            catalog=self.catalog,
            access=self.access,
            inbound=inbound,
            chat_key=WEB_CHAT.key,
            is_owner=True,
            args=list(args),
            end_sessions=self.owner.sessions.end_chat,
            notify_user=self.owner.notices.notify_user,
            notify_owner=self.owner.notices.notify_owner,
            user_memory=self.owner.user_memory,
            admin=self.admin,
        )
        try:
            reply: CommandReply = await run_admin(ctx)
        except Exception:
            # the edge of one web request: the owner gets an answer, the log the details
            logger.exception("web: /admin %s failed", " ".join(args[:2]))
            await self.store.audit(WEB_ACTOR, "command_failed", command=" ".join(args[:2]))
            return CommandReply(
                "That did not work: an error was logged. Try again, or look at the log."
            )
        return CommandReply(unescape(reply.text), reply.choices, reply.attachment)

    async def audit(self, action: str, **detail: object) -> None:
        """An audit row for a change the page makes without a chat command (a persona file
        saved from the editor)."""
        await self.store.audit(WEB_ACTOR, action, **detail)
