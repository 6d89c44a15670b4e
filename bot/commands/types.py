"""What a command gets and answers: the types every handler builds on (``bot/commands/table.py``
declares the commands, ``bot/commands/user.py``, ``bot/commands/memory.py`` and ``bot/admin/``
hold the handlers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config.model import Config
from bot.events import Choice, Inbound
from bot.gateway.access import Access
from bot.store import Store
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from partners.user_memory import UserMemory

if TYPE_CHECKING:
    from bot.admin.services import AdminServices


@dataclass(frozen=True)
class CommandReply:
    text: str
    choices: tuple[Choice, ...] = ()
    attachment: tuple[str, bytes] | None = None
    """A file sent with the reply: (file name, content)."""
    greet: str | None = None
    """A partner id: its greeting opens a conversation after this answer
    (``bot/delivery/greeter.py``)."""
    photo: bytes | None = None
    """A picture shown with the answer where the channel can (a partner's avatar)."""


@dataclass
class CommandContext:
    """What a command may use; built by the gateway for one message."""

    config: Config
    store: Store
    catalog: PartnerCatalog
    access: Access
    inbound: Inbound
    chat_key: str
    is_owner: bool
    args: list[str]
    end_sessions: Callable[[str, str], Awaitable[list[str]]]
    notify_user: Callable[[str, str], Awaitable[None]]
    notify_owner: Callable[[str, str], Awaitable[None]]
    """(platform, text): a DM to the owner, as the gateway sends its notices."""
    bot_can_read_groups: bool | None = None
    partner: Partner | None = None
    """The partner of this DM (selected or default), for the user memory commands."""
    user_memory: UserMemory | None = None
    admin: AdminServices | None = None
    """What owner commands reach beyond this (memory, reviews, consults...); None elsewhere."""
    download: Callable[[str], Awaitable[bytes]] | None = None
    """Fetches a file of the message's platform by its ref (``inbound.attachment``); given
    to the owner's commands only, so nobody else's file is ever downloaded."""


Handler = Callable[[CommandContext], Awaitable[CommandReply]]
