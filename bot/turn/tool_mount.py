"""The tools a turn mounts: a partner's forced and configurable tools with the owner's memory
tools suppressed and its MCP tools (``bot/turn/mcp_tools.py``), or the owner assistant's memory
tools and consult_partner; and which memory file a partner's writes land in."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.delivery.reply import chat_ref
from bot.store import ChatRow, MessageRow, SessionRow, Store
from bot.turn.conversation import Conversation
from bot.turn.mcp_tools import Asker, McpTools
from bot.turn.sessions import Sessions, Speaker, audience_for, search_audiences
from bot.turn.tools import ToolRegistry, ToolSurface
from partners.memory import MemoryFile, MemoryStore
from partners.persona import Partner
from partners.recall import Recall
from partners.tools import (
    OWNER_MEMORY_TOOL_NAMES,
    PARTNER_TOOL_NAMES,
    ToolContext,
    TurnTools,
    user_memory_file,
)

Consult = Callable[[ChatRow, Speaker, str, str], Awaitable[str]]
"""Runs a partner's chat loop on the owner's question (``TurnRunner.consult``)."""


@dataclass(frozen=True)
class ToolMount:
    """What a turn's tools are made of."""

    store: Store
    memory: MemoryStore
    owner_file: MemoryFile
    recall: Recall
    registry: ToolRegistry
    sessions: Sessions
    consult: Consult
    consult_budget: int
    mcp: McpTools | None = None
    """The partners' MCP tools (None: no ``[mcp]`` servers)."""

    async def for_turn(
        self, conversation: Conversation, session: SessionRow, last: MessageRow
    ) -> tuple[ToolSurface, ToolContext]:
        """The tools a turn mounts, answering ``last``: a partner's forced and configurable
        tools with the owner's memory tools suppressed and the MCP tools its preset names, or
        the owner assistant's memory tools and consult_partner with this turn's consult
        budget."""
        chat, partner, speaker = conversation.chat, conversation.partner, conversation.speaker
        turn = TurnTools(
            store=self.store,
            memory=self.memory,
            owner_file=self.owner_file,
            session_id=session.id,
            actor=speaker.user_key,
            user_name=speaker.name,
            source_message_id=last.id,
            recall=self.recall,
        )
        if partner is None:
            consult = functools.partial(self.consult, chat, speaker)
            ctx = ToolContext.for_owner(turn, consult, self.consult_budget)
            surface = self.registry.surface(
                forced=(*OWNER_MEMORY_TOOL_NAMES, "consult_partner"), owner="owner assistant"
            )
            return surface, ctx
        ctx = ToolContext.for_partner(
            turn,
            partner,
            write_file=write_file(partner, speaker),
            user_file=self.sessions.user_file(partner, chat, speaker),
            audiences=search_audiences(partner, audience_for(chat, speaker)),
        )
        surface = self.registry.surface(
            forced=PARTNER_TOOL_NAMES,
            allow=partner.preset.tools_allow,
            deny=partner.preset.tools_deny,
            suppressed=OWNER_MEMORY_TOOL_NAMES,
            owner=f"partner {partner.id}",
        )
        if self.mcp is not None and partner.preset.tools_mcp:
            owner_dm = speaker.is_owner and chat.kind == "dm"
            asker = Asker(last.id, chat_ref(chat), session.id, partner, speaker.user_key)
            mount = await self.mcp.mount(partner, asker, owner_dm, set(self.registry.names))
            surface = surface.with_tools(mount.tools, mount.refused, self.mcp.prefixes())
        return surface, ctx


def write_file(partner: Partner, speaker: Speaker) -> MemoryFile:
    """per_user: what a user says lands in that user's file; only the owner's own conversations
    change the partner's MEMORY.md (docs/architecture.md "Decisions": per-user writes)."""
    if partner.per_user and not speaker.is_owner:
        return user_memory_file(partner, speaker.user_key)
    return MemoryFile(partner.dir, "MEMORY.md")
