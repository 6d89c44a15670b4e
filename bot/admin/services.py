"""What the owner's ``/admin`` commands reach beyond an ordinary command: the memory store, the
reviewer, consults, the channels, the scheduler, settings and cost control.

Built once by ``build_app`` and handed to the gateway, which passes it on in every command's
context; user commands never look at it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from adapters.base import Channel
from bot.config.memory_settings import Settings
from bot.services.mcp_servers import McpServers
from bot.store import ChatRow
from bot.turn.budget import Budget
from bot.turn.sessions import Sessions, Speaker
from bot.workers.dispatcher import Dispatcher
from partners.lore_books import LoreLibrary
from partners.memory import MemoryFile, MemoryStore
from partners.review import Reviewer

Consult = Callable[[ChatRow, Speaker, str, str], Awaitable[str]]
"""(owner chat, owner, partner id, question) -> "Name: answer" (TurnRunner.consult)."""


class WebLogins(Protocol):
    """The web page's door, as ``/admin web`` uses it (``bot/web/server.py``)."""

    async def login_link(self) -> str: ...

    async def logout_all(self) -> int: ...


@dataclass
class AdminServices:
    memory: MemoryStore
    owner_file: MemoryFile
    reviewer: Reviewer
    consult: Consult
    sessions: Sessions
    dispatcher: Dispatcher
    channels: dict[str, Channel]
    next_runs: Callable[[], dict[str, datetime | None]]
    settings: Settings
    budget: Budget
    lore: LoreLibrary | None = None
    """Partners' lorebooks and what fired last (``/admin lore``)."""
    started_at: float = field(default_factory=time.time)
    web: WebLogins | None = None
    """The web page, when ``[web] enabled``; None otherwise."""
    mcp: McpServers | None = None
    """The ``[mcp]`` servers, for ``/admin status``."""
