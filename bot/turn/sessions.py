"""Session lifecycle: which session a message belongs to, when sessions end, and the frozen
system prompt each one carries (docs/architecture.md "Decisions": sessions end).

A session ends after ``memory.session_idle_hours`` of silence, at ``/new``, or at the first
message after its prompt is older than ``memory.session_max_hours``. The next session carries
the last ``memory.carry_turns`` turns of the previous one as history, so the user feels no
reset while new memory reaches the new prompt. The prompt is assembled once, when a session
starts, and stored with it: byte-identical on every turn and across restarts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources

from bot.config.memory import MemoryConfig
from bot.store import ChatRow, MessageRow, SessionRow, Store, new_session_id
from partners.catalog import PartnerCatalog
from partners.memory import MemoryFile, MemoryStore
from partners.persona import Partner, PromptContext, assemble_prompt, read_persona
from partners.tools import user_memory_file

logger = logging.getLogger(__name__)

OWNER_AUDIENCE = "owner"
"""Everything the owner says, on any platform, is the owner's: one audience for all of it."""
TITLE_CHARS = 60


def owner_assistant_prompt() -> str:
    return (resources.files("partners") / "prompts" / "owner_assistant.md").read_text("utf-8")


@dataclass(frozen=True)
class Speaker:
    user_key: str
    name: str
    is_owner: bool


def audience_for(chat: ChatRow, speaker: Speaker) -> str:
    """Who may later see a message: its DM user (the owner as one), or the whole group."""
    if chat.kind == "dm":
        return OWNER_AUDIENCE if speaker.is_owner else f"user:{speaker.user_key}"
    return f"chat:{chat.platform}:{chat.platform_chat_id}"


def search_audiences(partner: Partner, audience: str) -> list[str] | None:
    """What partner_search may return here: None (everything) only in shared scope."""
    return [audience] if partner.per_user else None


class Sessions:
    def __init__(
        self,
        store: Store,
        catalog: PartnerCatalog,
        memory: MemoryStore,
        settings: Callable[[], MemoryConfig],
        on_end: Callable[[list[str]], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.memory = memory
        self.settings = settings
        """The memory settings in effect (the owner may change them while running)."""
        self.on_end = on_end
        """Called with the ids of sessions that just ended (the review hooks in here)."""

    async def end_chat(self, chat_key: str, reason: str) -> list[str]:
        """End a chat's open sessions (``/new``, a partner change)."""
        ended = await self.store.end_chat_sessions(chat_key, reason)
        if ended and self.on_end is not None:
            await self.on_end(ended)
        return ended

    def user_file(self, partner: Partner, chat: ChatRow, speaker: Speaker) -> MemoryFile | None:
        """The per-user file shown in this chat: a non-owner's DM in per_user scope only."""
        if partner.per_user and chat.kind == "dm" and not speaker.is_owner:
            return user_memory_file(partner, speaker.user_key)
        return None

    async def current(
        self, chat: ChatRow, partner: Partner | None, speaker: Speaker, first: MessageRow | None
    ) -> SessionRow:
        """The open session of this chat and partner, or a new one (ending a stale one).
        ``first`` titles a new session; without it (a greeting opens the session) the first
        user message does."""
        partner_id = partner.id if partner else None
        session = await self.store.open_session(chat.chat_key, partner_id)
        return await self.continued(session, chat, partner, speaker, first)

    async def continued(
        self,
        session: SessionRow | None,
        chat: ChatRow,
        partner: Partner | None,
        speaker: Speaker,
        first: MessageRow | None,
    ) -> SessionRow:
        """:meth:`current` with the chat's open session already read (a turn reads it with
        its context): ``session`` while it is fresh, else a new one."""
        partner_id = partner.id if partner else None
        now = time.time()
        if session is not None:
            settings = self.settings()
            idle = now - session.last_active_at > settings.session_idle_hours * 3600
            old = now - session.created_at > settings.session_max_hours * 3600
            if not idle and not old:
                return session
            await self.store.end_session(session.id, "idle" if idle else "max_age")
            if self.on_end is not None:
                await self.on_end([session.id])
        previous = session or await self.store.latest_session(chat.chat_key, partner_id)
        session_id = new_session_id()
        prompt = await self._prompt(partner, chat, speaker, session_id)
        created = await self.store.create_session(
            session_id=session_id,
            partner_id=partner_id,
            chat_key=chat.chat_key,
            user_key=speaker.user_key if chat.kind == "dm" else None,
            audience=audience_for(chat, speaker),
            system_prompt=prompt,
            title=" ".join(first.text.split())[:TITLE_CHARS] if first else "",
            carry_from=previous.id if previous else None,
        )
        logger.info(
            "session %s started: partner=%s chat=%s prompt=%d chars",
            created.id,
            partner_id or "(owner assistant)",
            chat.chat_key,
            len(prompt),
        )
        return created

    async def _prompt(
        self, partner: Partner | None, chat: ChatRow, speaker: Speaker, session_id: str
    ) -> str:
        if partner is None:
            return await asyncio.to_thread(owner_assistant_prompt)
        user_file = self.user_file(partner, chat, speaker)
        context = PromptContext(
            user=speaker.name if chat.kind == "dm" else (chat.title or "the group"),
            session=session_id,
            platform=chat.platform,
            user_memory=await self.memory.read(user_file) if user_file else None,
        )
        settings = self.settings()
        assembled = assemble_prompt(
            partner,
            context,
            budget=settings.context_budget,
            notice=settings.budget_notice,
            files=await read_persona(self.memory, partner),
        )
        if assembled.over_budget:
            logger.warning(
                "partner %s: prompt over budget (%d > %d chars); heaviest: %s",
                partner.id,
                sum(assembled.sizes.values()),
                settings.context_budget,
                ", ".join(assembled.heaviest),
            )
        return assembled.text

    async def history(self, session: SessionRow, carry_turns: int) -> list[MessageRow]:
        """This session's messages, preceded by the carried turns of the previous session."""
        rows = await self.store.session_messages(session.id)
        if session.carry_from and carry_turns > 0:
            previous = await self.store.session_messages(session.carry_from)
            return with_carried(rows, previous, carry_turns)
        return rows


def with_carried(
    rows: list[MessageRow], previous: list[MessageRow], turns: int
) -> list[MessageRow]:
    """A session's messages preceded by the last ``turns`` turns of the session it carries
    from (``previous``)."""
    return last_turns(previous, turns) + rows if turns > 0 else rows


def last_turns(rows: list[MessageRow], turns: int) -> list[MessageRow]:
    """The tail of ``rows`` holding the last ``turns`` user-to-reply exchanges."""
    seen = 0
    for index in range(len(rows) - 1, -1, -1):
        if rows[index].role == "user" and (index == 0 or rows[index - 1].role != "user"):
            seen += 1
            if seen == turns:
                return rows[index:]
    return rows
