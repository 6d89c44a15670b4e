"""The owner assistant's ``consult_partner`` (and ``/admin consult``): a partner answers the
owner's question with its own chat loop (docs/architecture.md: consults).

Every consult from one owner chat threads into one partner session, in a chat of its own beside
the owner's (:func:`consult_chat_key`), titled by the first question, so follow-ups keep
context; ``/new`` in the owner chat ends it. The partner answers as itself: its persona, memory
and forced tools, writing its own memory. What it costs is booked as ``consult``; no reply
marker reaches the owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

from bot.config.memory import MemoryConfig
from bot.config.model import Config
from bot.services.llm import LLMError
from bot.store import ChatRow, MessageRow, NewMessage, NewUsage, SessionRow, Store
from bot.text import markers
from bot.text.markers import EMPTY_ANSWER
from bot.turn.budget import Budget
from bot.turn.chat import ChatLoop, TurnInput, TurnOutput, history_window
from bot.turn.conversation import Conversation
from bot.turn.input import partner_timezone
from bot.turn.sessions import OWNER_AUDIENCE, Sessions, Speaker
from bot.turn.tools import ToolSurface
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from partners.tools import ToolContext, ToolError

TurnTools = Callable[
    [Conversation, SessionRow, MessageRow], Awaitable[tuple[ToolSurface, ToolContext]]
]
"""The tools a turn of this conversation mounts, answering that message (TurnRunner's)."""
SpentTokens = Callable[[Partner, str, TurnOutput], NewUsage]
"""What a model answer spent, booked on today for the partner, as the given kind."""


def consult_chat_key(owner_chat_key: str) -> str:
    return f"{owner_chat_key}#consult"


class Consults:
    """Runs consults; one for the whole gateway."""

    def __init__(
        self,
        config: Config,
        store: Store,
        catalog: PartnerCatalog,
        sessions: Sessions,
        chat_loop: ChatLoop,
        tools: TurnTools,
        spent: SpentTokens,
        budget: Budget | None,
        memory_settings: Callable[[], MemoryConfig],
    ) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.sessions = sessions
        self.chat_loop = chat_loop
        self.tools = tools
        self.spent = spent
        self.budget = budget
        self.memory_settings = memory_settings

    async def consult(
        self, owner_chat: ChatRow, owner: Speaker, partner_id: str, question: str
    ) -> str:
        """Run a partner's own chat loop on the owner's question; "Name: answer". A partner
        that is unknown, resting or whose model fails is a :class:`ToolError` the owner's
        assistant reads."""
        partner = await self._partner(partner_id)
        chat = replace(owner_chat, chat_key=consult_chat_key(owner_chat.chat_key))
        question_row = await self._question(chat, partner, owner, question)
        session = await self.sessions.current(chat, partner, owner, question_row)
        await self.store.assign_session([question_row.id], session.id)
        turn = await self._turn_input(session, partner, question_row)
        surface, ctx = await self.tools(Conversation(chat, partner, owner), session, question_row)
        model = partner.preset.model or self.config.llm.model
        try:
            output = await self.chat_loop.run(turn, surface, ctx, model=model)
        except LLMError as exc:
            raise ToolError(f"{partner.name} could not answer: {exc}") from exc
        usage = self.spent(partner, "consult", output)
        await self.store.add_usage(
            usage.day,
            usage.partner_id,
            usage.kind,
            usage.model,
            usage.prompt_tokens,
            usage.completion_tokens,
        )
        answer = markers.strip(output.text) or EMPTY_ANSWER  # no marker reaches the owner
        await self._record_answer(chat, session, partner, answer)
        return f"{partner.name}: {answer}"

    async def _partner(self, partner_id: str) -> Partner:
        """The partner consulted, if it exists and has tokens left today."""
        partner = await self.catalog.find(partner_id)
        if partner is None:
            known = ", ".join(p.id for p in self.catalog.all())
            raise ToolError(f"no partner {partner_id!r}; partners: {known}")
        if self.budget is not None and await self.budget.over_budget(partner):
            raise ToolError(f"{partner.name} is resting: its token budget for today is used up")
        return partner

    async def _question(
        self, chat: ChatRow, partner: Partner, owner: Speaker, question: str
    ) -> MessageRow:
        message_id = await self.store.add_message(
            NewMessage(
                chat.chat_key,
                "user",
                question,
                OWNER_AUDIENCE,
                "done",
                partner_id=partner.id,
                user_key=owner.user_key,
                speaker=owner.name,
            )
        )
        assert message_id is not None
        row = await self.store.message(message_id)
        assert row is not None
        return row

    async def _turn_input(
        self, session: SessionRow, partner: Partner, question: MessageRow
    ) -> TurnInput:
        """The session's earlier consults as history, the question as the new message."""
        history = await self.sessions.history(session, 0)
        return TurnInput(
            session.system_prompt,
            history_window(
                [r for r in history if r.id != question.id],
                self.memory_settings().history_chars,
            ),
            [question],
            timezone=partner_timezone(self.config, partner),
        )

    async def _record_answer(
        self, chat: ChatRow, session: SessionRow, partner: Partner, answer: str
    ) -> None:
        await self.store.add_message(
            NewMessage(
                chat.chat_key,
                "assistant",
                answer,
                OWNER_AUDIENCE,
                "delivered",
                session_id=session.id,
                partner_id=partner.id,
                speaker=partner.name,
            )
        )
