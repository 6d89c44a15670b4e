"""Working one queue key: pending messages -> session -> chat loop -> recorded reply -> delivery.

Every inbound message that calls for an answer belongs to exactly one turn, and every turn
records exactly one reply (DESIGN.md "Decisions": one turn, one reply). The reply and the
closing of its inbound messages are one transaction, so a crash before it re-runs the turn
(nothing was sent yet) and a crash after it only re-delivers the remaining chunks.

``TurnRunner`` orchestrates; beside it live who is talking (``bot/conversation.py``), the
turns answered without the model (``bot/quiet_turns.py``), failure counting and the apology
(``bot/turn_failures.py``), stopping a turn (``bot/turn_stops.py``) and the typing indicator
and reply preview (``bot/turn_feedback.py``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from zoneinfo import ZoneInfo

from adapters.base import Channel, MediaChannel, ReplyStream
from bot import markers
from bot.access import OwnerCheck
from bot.budget import Budget
from bot.chat import ChatLoop, TurnInput, history_window
from bot.config import Config, MemoryConfig
from bot.conversation import Conversation, resolve_conversation
from bot.delivery import Delivery, PendingReply, chat_ref
from bot.dispatcher import Worked
from bot.llm import LLMError
from bot.markers import EMPTY_ANSWER
from bot.media import MediaReader, Prepared, book
from bot.quiet_turns import resting, unheard
from bot.sessions import (
    OWNER_AUDIENCE,
    TITLE_CHARS,
    Sessions,
    Speaker,
    audience_for,
    search_audiences,
    with_carried,
)
from bot.store import (
    ChatRow,
    Lease,
    LeaseLost,
    MediaRow,
    MessageRow,
    NewMedia,
    NewMessage,
    NewUsage,
    SessionRow,
    Store,
    TurnContext,
)
from bot.tools import ToolRegistry, ToolSurface
from bot.transcripts import load_transcripts
from bot.turn_failures import failed_attempt
from bot.turn_feedback import accumulate, typing
from bot.turn_stops import STOPPED, TurnStopped, TurnStops
from bot.voice_replies import VoiceReplies
from partners.catalog import PartnerCatalog
from partners.lore_books import LoreLibrary
from partners.memory import MemoryFile, MemoryStore
from partners.persona import Partner
from partners.recall import Recall
from partners.review import Reviewer
from partners.tools import (
    OWNER_MEMORY_TOOL_NAMES,
    PARTNER_TOOL_NAMES,
    ToolContext,
    ToolError,
    TurnBudget,
    user_memory_file,
)

logger = logging.getLogger(__name__)

OWNER_QUEUE = "@owner"
APOLOGY = "Sorry — I can't think right now (my model is unreachable). Please try again in a bit."
MAX_REACTIONS_SHOWN = 20


def _lost(queue_key: str, lost: LeaseLost) -> Worked:
    logger.warning("turn for %s stopped: %s", queue_key, lost)
    return Worked.LOST


def consult_chat_key(owner_chat_key: str) -> str:
    return f"{owner_chat_key}#consult"


def queue_key(chat_key: str, partner_id: str | None) -> str:
    return f"{chat_key}|{partner_id or OWNER_QUEUE}"


class TurnRunner:
    def __init__(
        self,
        config: Config,
        store: Store,
        memory: MemoryStore,
        catalog: PartnerCatalog,
        sessions: Sessions,
        chat_loop: ChatLoop,
        registry: ToolRegistry,
        delivery: Delivery,
        channels: dict[str, Channel],
        owner_file: MemoryFile,
        is_owner: OwnerCheck,
        reviewer: Reviewer,
        budget: Budget | None = None,
        memory_settings: Callable[[], MemoryConfig] | None = None,
        media: MediaReader | None = None,
        voice: VoiceReplies | None = None,
        lore: LoreLibrary | None = None,
        recall: Recall | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.memory = memory
        self.catalog = catalog
        self.sessions = sessions
        self.chat_loop = chat_loop
        self.registry = registry
        self.delivery = delivery
        self.channels = channels
        self.owner_file = owner_file
        self.is_owner = is_owner
        self.reviewer = reviewer
        self.budget = budget
        """Cost control, checked before any model call; None: no limits."""
        self.memory_settings = memory_settings or (lambda: config.memory)
        """The memory settings in effect (the owner may change them while running)."""
        self.clock: Callable[[], float] = time.time
        """When tokens are spent, for the day they are booked on."""
        self.media = media
        """Reads voice notes and photos before the model runs; None: text only."""
        self.voice = voice
        """Speaks replies (``/voice``); None: text only."""
        self.lore = lore
        """Lorebooks and post-history instructions; None: none are read."""
        self.recall = recall or Recall(store)
        """History search for partner_search (semantic when embeddings are configured)."""
        self._stops = TurnStops()
        """The stop switches of the turns running now (Ctrl-C in the console)."""

    def stop(self, chat_key: str) -> bool:
        """Stop the turn running in this chat at once (its model call is cancelled and it is
        answered with :data:`STOPPED`); False if none is running."""
        return self._stops.stop(chat_key)

    async def process(self, lease: Lease) -> Worked:
        """Answer what is pending for the queue key this worker holds ``lease`` on.

        A turn that raises is counted against its messages, which run again (the dispatcher
        calls back while they are pending); the third failure closes them with an apology.
        Everything the turn needs before its model call is read at once, with the queue.
        A turn whose lease was taken over stops where it is: its writes were refused, and the
        new holder answers the messages.

        Replies of the key whose delivery was cut off are finished first, before anything
        newer is answered, so the chat sees its replies in order; an error meanwhile (the
        database away) reaches the dispatcher, which works the key again after a pause."""
        key = lease.queue_key
        context = await self.store.turn_context(key, MAX_REACTIONS_SHOWN)
        if context.unfinished:
            try:
                if await self.delivery.finish(context.unfinished, lease):
                    return Worked.DELIVERED  # the dispatcher calls back for what is pending
            except LeaseLost as lost:
                return _lost(key, lost)
        pending = context.pending
        if not pending:
            return Worked.IDLE
        try:
            await self._turn(context, lease)
        except LeaseLost as lost:
            return _lost(key, lost)
        except Exception as exc:  # one turn is an outer edge: count it, lose nothing
            logger.exception("turn for %s failed", key)
            return await self._failed(pending, exc, lease)
        return Worked.ANSWERED

    async def _failed(self, pending: list[MessageRow], exc: Exception, lease: Lease) -> Worked:
        try:
            await failed_attempt(self.store, self.catalog, self.delivery, pending, exc, lease=lease)
        except LeaseLost as lost:
            return _lost(lease.queue_key, lost)
        return Worked.FAILED

    async def _turn(self, context: TurnContext, lease: Lease) -> None:
        pending = context.pending
        conversation = resolve_conversation(
            self.catalog, self.is_owner, pending[-1], context.chat, context.user
        )
        if conversation is None:
            logger.error(
                "queue %s: chat or partner is gone; closing %d messages",
                pending[-1].chat_key,
                len(pending),
            )
            await self._close_orphans(pending)
            return
        session = await self.sessions.continued(
            context.session,
            conversation.chat,
            conversation.partner,
            conversation.speaker,
            pending[0],
        )
        if await resting(
            self.budget, self.store, self.delivery, conversation, session, pending, lease=lease
        ):
            return
        prepared = await self._prepare(conversation, pending, context.media)
        if not prepared.rows:
            await unheard(
                self.store,
                self.delivery,
                self.config,
                self.clock,
                conversation,
                session,
                pending,
                lease=lease,
            )
            return
        if not session.title:  # a session opened by a voice note is titled by its transcript
            title = " ".join(prepared.rows[0].text.split())[:TITLE_CHARS]
            await self.store.set_session_title(session.id, title)
        channel = self.channels.get(conversation.chat.platform)
        speak = (
            self.voice is not None
            and isinstance(channel, MediaChannel)
            and await self.voice.wanted(conversation.speaker.user_key, prepared.spoken)
        )
        stream = None
        if channel is not None and not speak:  # a spoken reply is sent whole, not previewed
            stream = channel.open_stream(
                chat_ref(conversation.chat), pending[-1].platform_message_id
            )
        reply, usage = await self._answer(conversation, session, prepared, stream, context)
        if speak and reply.role == "assistant" and reply.text:
            reply = replace(reply, media=(*reply.media, NewMedia("speak", "voice")))
        failed = reply.role == "notice" and reply.text != STOPPED
        reply_id = await self.store.finish_turn(
            [row.id for row in pending],
            session.id,
            reply,
            "failed" if failed else "done",
            usage=usage,
            lease=lease,
        )
        partner_id = conversation.partner.id if conversation.partner else None
        actions = tuple(MediaRow(reply_id, m.kind, m.ref) for m in reply.media)
        pending_reply = PendingReply(
            reply_id,
            conversation.chat,
            reply.text,
            partner_id,
            pending[-1].platform_message_id,
            actions=actions,
            lease=lease,
        )
        await self.delivery.send(pending_reply, stream)
        if conversation.partner is not None:
            await self.reviewer.after_turn(session, self.memory_settings().history_chars)

    async def _close_orphans(self, pending: list[MessageRow]) -> None:
        for row in pending:
            await self.store.set_status(row.id, "failed")

    async def _prepare(
        self,
        conversation: Conversation,
        pending: list[MessageRow],
        media: dict[int, list[MediaRow]],
    ) -> Prepared:
        """Voice notes transcribed, photos seen or described (``bot/media.py``), with a
        typing indicator meanwhile; their cost booked."""
        if self.media is None:
            return Prepared(list(pending))
        async with typing(self.channels, conversation.chat):
            prepared = await self.media.prepare(
                conversation.chat.platform, conversation.partner, pending, media
            )
        partner_id = conversation.partner.id if conversation.partner else OWNER_AUDIENCE
        await book(self.store, self.config.usage_day(self.clock()), partner_id, prepared.spent)
        return prepared

    async def _answer(
        self,
        conversation: Conversation,
        session: SessionRow,
        prepared: Prepared,
        stream: ReplyStream | None,
        read: TurnContext,
    ) -> tuple[NewMessage, NewUsage | None]:
        """The reply to record, and what its model calls cost (None: no model answered)."""
        chat, partner, speaker = conversation.chat, conversation.partner, conversation.speaker
        pending = prepared.rows
        timezone = self._timezone(partner)
        history, media = await self._history(session, read)
        since = history[-1].id if history else 0
        context: list[MessageRow] = []
        if chat.kind != "dm":
            context = await self.store.recent_context(
                chat.chat_key, since, self.config.access.group_context_messages
            )
        transcript = None
        if partner is None:
            transcript = await load_transcripts(self.store, self.catalog, session.id, timezone)
        notes = self.media.notes(history, media) if self.media is not None else {}
        notes.update(prepared.notes)
        reactions = read.reactions
        # the context read the reactions after the session's last message; a window that
        # kept none of the history (one reply longer than it) shows the chat's latest, as before
        if since != read.reactions_after:
            reactions = await self.store.recent_reactions(
                chat.chat_key, partner.id if partner else None, since, MAX_REACTIONS_SHOWN
            )
        turn = TurnInput(
            session.system_prompt,
            history,
            pending,
            context,
            chat.kind != "dm",
            timezone,
            transcript=transcript,
            notes=notes,
            images=prepared.images,
            reactions=reactions,
            after_history=await self._after_history(conversation, history, pending),
        )
        surface, ctx = self._tools(conversation, session, pending[-1])
        model = (partner.preset.model if partner else None) or self.config.llm.model
        role, text = "assistant", EMPTY_ANSWER
        actions: tuple[NewMedia, ...] = ()
        usage = None
        try:
            async with typing(self.channels, chat):
                output = await self._stops.unless_stopped(
                    chat.chat_key,
                    self.chat_loop.run(
                        turn,
                        surface,
                        ctx,
                        model=model,
                        on_delta=accumulate(stream) if stream else None,
                    ),
                )
            text, actions = markers.acted_on(
                output.text or EMPTY_ANSWER,
                lambda name: None if partner is None else partner.sticker(name, chat.platform),
            )
            usage = self._usage(
                partner,
                "chat",
                output.model,
                output.usage.prompt_tokens,
                output.usage.completion_tokens,
            )
        except LLMError as exc:
            logger.warning("turn in %s failed: %s", chat.chat_key, exc)
            role, text = "notice", APOLOGY
        except TurnStopped:
            logger.info("turn in %s stopped by the chat", chat.chat_key)
            role, text = "notice", STOPPED
        reply = NewMessage(
            chat_key=chat.chat_key,
            role=role,
            text=text,
            audience=audience_for(chat, speaker),
            status="delivering",
            session_id=session.id,
            partner_id=partner.id if partner else None,
            speaker=partner.name if partner else "assistant",
            media=actions,
        )
        return reply, usage

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

    async def _after_history(
        self,
        conversation: Conversation,
        history: list[MessageRow],
        pending: list[MessageRow],
    ) -> str:
        """What the partner's lorebook brings in this turn, with its post-history note."""
        partner = conversation.partner
        if self.lore is None or partner is None:
            return ""
        scanned = [row.text for row in (*history, *pending) if row.role in ("user", "assistant")]
        return await asyncio.to_thread(
            self.lore.turn_note,
            partner,
            scanned,
            conversation.speaker.name,
            conversation.chat.chat_key,
            self.clock(),
        )

    def _tools(
        self, conversation: Conversation, session: SessionRow, last: MessageRow
    ) -> tuple[ToolSurface, ToolContext]:
        chat, partner, speaker = conversation.chat, conversation.partner, conversation.speaker
        ctx = ToolContext(
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
            ctx.budget = TurnBudget(consults_left=self.config.owner.consult_budget)
            ctx.consult = functools.partial(self.consult, chat, speaker)
            surface = self.registry.surface(
                forced=(*OWNER_MEMORY_TOOL_NAMES, "consult_partner"), owner="owner assistant"
            )
            return surface, ctx
        ctx.partner = partner
        ctx.user_file = self.sessions.user_file(partner, chat, speaker)
        ctx.audiences = search_audiences(partner, audience_for(chat, speaker))
        ctx.write_file = self._write_file(partner, speaker)
        surface = self.registry.surface(
            forced=PARTNER_TOOL_NAMES,
            allow=partner.preset.tools_allow,
            deny=partner.preset.tools_deny,
            suppressed=OWNER_MEMORY_TOOL_NAMES,
            owner=f"partner {partner.id}",
        )
        return surface, ctx

    async def consult(
        self, owner_chat: ChatRow, owner: Speaker, partner_id: str, question: str
    ) -> str:
        """Run a partner's own chat loop on the owner's question (DESIGN.md: consults).

        Every consult from one owner chat threads into one partner session, titled by the first
        question, so follow-ups keep context; ``/new`` in the owner chat ends it. The partner
        answers as itself: its persona, memory and forced tools, writing its own memory."""
        partner = self.catalog.get(partner_id)
        if partner is None:
            known = ", ".join(p.id for p in self.catalog.all())
            raise ToolError(f"no partner {partner_id!r}; partners: {known}")
        if self.budget is not None and await self.budget.over_budget(partner):
            raise ToolError(f"{partner.name} is resting: its token budget for today is used up")
        chat = replace(owner_chat, chat_key=consult_chat_key(owner_chat.chat_key))
        question_row = await self._consult_question(chat, partner, owner, question)
        session = await self.sessions.current(chat, partner, owner, question_row)
        await self.store.assign_session([question_row.id], session.id)
        history = await self.sessions.history(session, 0)
        turn = TurnInput(
            session.system_prompt,
            history_window(
                [r for r in history if r.id != question_row.id],
                self.memory_settings().history_chars,
            ),
            [question_row],
            timezone=self._timezone(partner),
        )
        conversation = Conversation(chat, partner, owner)
        surface, ctx = self._tools(conversation, session, question_row)
        model = partner.preset.model or self.config.llm.model
        try:
            output = await self.chat_loop.run(turn, surface, ctx, model=model)
        except LLMError as exc:
            raise ToolError(f"{partner.name} could not answer: {exc}") from exc
        usage = self._usage(
            partner,
            "consult",
            output.model,
            output.usage.prompt_tokens,
            output.usage.completion_tokens,
        )
        await self.store.add_usage(
            usage.day,
            usage.partner_id,
            usage.kind,
            usage.model,
            usage.prompt_tokens,
            usage.completion_tokens,
        )
        answer = markers.strip(output.text) or EMPTY_ANSWER  # no marker reaches the owner
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
        return f"{partner.name}: {answer}"

    async def _consult_question(
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

    @staticmethod
    def _write_file(partner: Partner, speaker: Speaker) -> MemoryFile:
        """per_user: what a user says lands in that user's file; only the owner's own
        conversations change the partner's MEMORY.md (DESIGN.md "Decisions": per-user writes)."""
        if partner.per_user and not speaker.is_owner:
            return user_memory_file(partner, speaker.user_key)
        return MemoryFile(partner.dir, "MEMORY.md")

    def _timezone(self, partner: Partner | None) -> ZoneInfo:
        owner = self.config.owner_timezone()
        return partner.timezone(owner) if partner is not None else owner

    def _usage(
        self, partner: Partner | None, kind: str, model: str, prompt: int, completion: int
    ) -> NewUsage:
        """Tokens spent now, booked on today for the partner (or the owner's assistant)."""
        return NewUsage(
            self.config.usage_day(self.clock()),
            partner.id if partner else OWNER_AUDIENCE,
            kind,
            model,
            prompt,
            completion,
        )
