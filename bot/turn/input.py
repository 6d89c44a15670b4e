"""What the model reads in one turn, gathered into a :class:`~bot.turn.chat.TurnInput`.

Beside the session's frozen system prompt (docs/architecture.md "Prompt"; nothing here changes it):
the session's history window, the group's messages not addressed to the partner, the transcripts
the owner referenced, how voice notes and photos are marked, the reactions to the partner's
messages since its last reply, and what the partner's lorebook brings in. Most of it was read with
the turn's queue (:class:`~bot.store.TurnContext`); what that read could not know — a session that
just started, a history window that kept none of it — is read here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from zoneinfo import ZoneInfo

from bot.config.memory import MemoryConfig
from bot.config.model import Config
from bot.store import MediaRow, MessageRow, SessionRow, Store, TurnContext
from bot.turn.chat import TurnInput, history_window
from bot.turn.conversation import Conversation
from bot.turn.media import MediaReader, Prepared
from bot.turn.scene_turns import scene_context
from bot.turn.sessions import Sessions, with_carried
from bot.turn.transcripts import load_transcripts
from partners.catalog import PartnerCatalog
from partners.lore_books import DepthNote, LoreLibrary
from partners.persona import Partner

MAX_REACTIONS_SHOWN = 20


def partner_timezone(config: Config, partner: Partner | None) -> ZoneInfo:
    """The zone a turn's messages are dated in: the partner's, else the owner's."""
    owner = config.owner_timezone()
    return partner.timezone(owner) if partner is not None else owner


class TurnPrompt:
    """Builds the model's input for a turn, from the turn's context and the store."""

    def __init__(
        self,
        config: Config,
        store: Store,
        catalog: PartnerCatalog,
        sessions: Sessions,
        memory_settings: Callable[[], MemoryConfig],
        media: MediaReader | None,
        lore: LoreLibrary | None,
    ) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.sessions = sessions
        self.memory_settings = memory_settings
        self.media = media
        self.lore = lore

    async def build(
        self,
        conversation: Conversation,
        session: SessionRow,
        prepared: Prepared,
        read: TurnContext,
        now: float,
        scene: bool = False,
    ) -> TurnInput:
        """The input for ``prepared`` (the turn's messages, their media read) in ``session``,
        with ``read`` as the turn's context read it; ``now`` times the lorebook's entries.
        In a ``scene`` the group's history holds the other partners' words too."""
        chat, partner = conversation.chat, conversation.partner
        history, media = await self._history(session, read)
        since = history[-1].id if history else 0
        context, context_after = await self._group_context(
            conversation, since, [*history, *prepared.rows] if scene else None
        )
        notes = self.media.notes(history, media) if self.media is not None else {}
        notes.update(prepared.notes)
        return TurnInput(
            session.system_prompt,
            history,
            prepared.rows,
            context,
            chat.kind != "dm",
            partner_timezone(self.config, partner),
            transcript=await self._transcript(conversation, session),
            notes=notes,
            images=prepared.images,
            reactions=await self._reactions(conversation, since, read),
            after_history=await self._after_history(conversation, history, prepared.rows, now),
            depth_note=await self._depth_note(conversation),
            context_after=context_after,
        )

    async def _history(
        self, session: SessionRow, read: TurnContext
    ) -> tuple[list[MessageRow], dict[int, list[MediaRow]]]:
        """The history window of ``session`` and the media of its messages: as the turn's
        context read them when the turn goes on with the session it read, else read now (a
        session that just started carries turns the context did not read)."""
        settings = self.memory_settings()
        if read.session is not None and read.session.id == session.id:
            rows = with_carried(read.history, read.carried, settings.carry_turns)
            return history_window(rows, settings.history_chars), read.media
        history = history_window(
            await self.sessions.history(session, settings.carry_turns), settings.history_chars
        )
        if self.media is None:
            return history, {}
        return history, await self.store.media_for([row.id for row in history])

    async def _group_context(
        self, conversation: Conversation, since: int, own: list[MessageRow] | None
    ) -> tuple[list[MessageRow], list[MessageRow]]:
        """In a group: its messages after the history window that were not addressed to the
        partner; in a scene (``own``: the rows of the partner's turn, history included) what
        everyone else said, split at the message the turn answers."""
        chat, partner = conversation.chat, conversation.partner
        if chat.kind == "dm":
            return [], []
        limit = self.config.access.group_context_messages
        if own is not None and partner is not None:
            return await scene_context(self.store, partner.id, chat.chat_key, since, own, limit)
        return await self.store.recent_context(chat.chat_key, since, limit), []

    async def _transcript(self, conversation: Conversation, session: SessionRow) -> str | None:
        """The partner sessions the owner referenced in this session (owner's turns only)."""
        if conversation.partner is not None:
            return None
        timezone = partner_timezone(self.config, None)
        return await load_transcripts(self.store, self.catalog, session.id, timezone)

    async def _reactions(
        self, conversation: Conversation, since: int, read: TurnContext
    ) -> list[MessageRow]:
        """The reactions after the history window. The context read those after the
        session's last message; a window that kept none of the history (one reply longer
        than it) shows the chat's latest, as before."""
        if since == read.reactions_after:
            return read.reactions
        partner = conversation.partner
        return await self.store.recent_reactions(
            conversation.chat.chat_key,
            partner.id if partner else None,
            since,
            MAX_REACTIONS_SHOWN,
        )

    async def _depth_note(self, conversation: Conversation) -> DepthNote | None:
        """The partner's card's depth prompt (``extensions.depth_prompt``), if it has one."""
        partner = conversation.partner
        if self.lore is None or partner is None:
            return None
        if self.lore.depth_read(partner):  # the card as read before: nothing to wait for
            return self.lore.depth_note(partner, conversation.speaker.name)
        return await asyncio.to_thread(self.lore.depth_note, partner, conversation.speaker.name)

    async def _after_history(
        self,
        conversation: Conversation,
        history: list[MessageRow],
        pending: list[MessageRow],
        now: float,
    ) -> str:
        """What the partner's lorebook brings in this turn, with its post-history note."""
        partner = conversation.partner
        if self.lore is None or partner is None or self.lore.without_note(partner):
            return ""  # most partners have neither file: no hop to a thread for nothing
        scanned = [row.text for row in (*history, *pending) if row.role in ("user", "assistant")]
        return await asyncio.to_thread(
            self.lore.turn_note,
            partner,
            scanned,
            conversation.speaker.name,
            conversation.chat.chat_key,
            now,
        )
