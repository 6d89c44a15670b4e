"""Working one queue key: pending messages -> session -> chat loop -> recorded reply -> delivery.

Every inbound message that calls for an answer belongs to exactly one turn, and every turn
records exactly one reply (DESIGN.md "Decisions": one turn, one reply). The reply and the
closing of its inbound messages are one transaction, so a crash before it re-runs the turn
(nothing was sent yet) and a crash after it only re-delivers the remaining chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TypeVar
from zoneinfo import ZoneInfo

from adapters.base import Channel, MediaChannel, ReplyStream
from bot import markers
from bot.access import OwnerCheck
from bot.budget import Budget
from bot.chat import ChatLoop, TurnInput, history_window
from bot.config import Config, MemoryConfig
from bot.delivery import Delivery, PendingReply, chat_ref
from bot.dispatcher import Worked
from bot.events import storable
from bot.llm import Delta, LLMError
from bot.markers import EMPTY_ANSWER
from bot.media import MediaReader, Prepared, book
from bot.sessions import (
    OWNER_AUDIENCE,
    TITLE_CHARS,
    Sessions,
    Speaker,
    audience_for,
    search_audiences,
)
from bot.store import ChatRow, MediaRow, MessageRow, NewMedia, NewMessage, SessionRow, Store
from bot.tools import ToolRegistry, ToolSurface
from bot.transcripts import load_transcripts
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
T = TypeVar("T")

TYPING_DELAY_SECONDS = 0.5
"""A reply faster than this needs no typing indicator (and the platform one call less)."""
TYPING_REFRESH_SECONDS = 4.5
OWNER_QUEUE = "@owner"
APOLOGY = "Sorry — I can't think right now (my model is unreachable). Please try again in a bit."
TURN_FAILED = (
    "Sorry — something went wrong on my side with that message and I couldn't answer it. "
    "Please try again, perhaps in other words."
)
VOICE_UNHEARD = (
    "Sorry — I can't listen to voice messages here right now. Could you write it for me?"
)
"""Said once a day per user when a voice note without a caption could not be transcribed."""
MAX_REACTIONS_SHOWN = 20
MAX_TURN_ATTEMPTS = 3
"""Turns that raise before a message is given up (DESIGN.md: nothing stays pending forever)."""
ERROR_DETAIL_CHARS = 300
STOPPED = "(stopped)"
"""The answer to a turn its chat stopped (Ctrl-C in the console): a note, not the partner's."""


class TurnStopped(Exception):
    """The chat asked to stop the running turn."""


def consult_chat_key(owner_chat_key: str) -> str:
    return f"{owner_chat_key}#consult"


def queue_key(chat_key: str, partner_id: str | None) -> str:
    return f"{chat_key}|{partner_id or OWNER_QUEUE}"


@dataclass(frozen=True)
class Conversation:
    """Who is talking where, resolved once per turn."""

    chat: ChatRow
    partner: Partner | None
    speaker: Speaker


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
        self._stops: dict[str, asyncio.Event] = {}
        """Chat key -> set to stop the model call of the turn running there."""

    def stop(self, chat_key: str) -> bool:
        """Stop the turn running in this chat at once (its model call is cancelled and it is
        answered with :data:`STOPPED`); False if none is running."""
        requested = self._stops.get(chat_key)
        if requested is None:
            return False
        requested.set()
        return True

    async def process(self, key: str) -> Worked:
        """Answer what is pending for one queue key.

        A turn that raises is counted against its messages, which run again (the dispatcher
        calls back while they are pending); the third failure closes them with an apology."""
        pending = await self.store.pending(key)
        if not pending:
            return Worked.IDLE
        try:
            await self._turn(pending)
        except Exception as exc:  # one turn is an outer edge: count it, lose nothing
            logger.exception("turn for %s failed", key)
            await self._failed_attempt(pending, exc)
            return Worked.FAILED
        return Worked.ANSWERED

    async def _turn(self, pending: list[MessageRow]) -> None:
        conversation = await self._conversation(pending[-1])
        if conversation is None:
            logger.error(
                "queue %s: chat or partner is gone; closing %d messages",
                pending[-1].chat_key,
                len(pending),
            )
            await self._close_orphans(pending)
            return
        session = await self.sessions.current(
            conversation.chat, conversation.partner, conversation.speaker, pending[0]
        )
        if await self._resting(conversation, session, pending):
            return
        prepared = await self._prepare(conversation, pending)
        if not prepared.rows:
            await self._unheard(conversation, session, pending)
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
        reply = await self._answer(conversation, session, prepared, stream)
        if speak and reply.role == "assistant" and reply.text:
            reply = replace(reply, media=(*reply.media, NewMedia("speak", "voice")))
        failed = reply.role == "notice" and reply.text != STOPPED
        reply_id = await self.store.finish_turn(
            [row.id for row in pending], session.id, reply, "failed" if failed else "done"
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
        )
        await self.delivery.send(pending_reply, stream)
        if conversation.partner is not None:
            await self.reviewer.after_turn(session, self.memory_settings().history_chars)

    async def _failed_attempt(self, pending: list[MessageRow], exc: Exception) -> None:
        attempts = await self.store.count_failed_turn([row.id for row in pending])
        if attempts == 0:  # the reply was recorded before it failed: nothing is left pending
            return
        if attempts < MAX_TURN_ATTEMPTS:
            logger.warning(
                "turn attempt %d of %d failed; trying again", attempts, MAX_TURN_ATTEMPTS
            )
            return
        await self._give_up(pending, attempts, exc)

    async def _give_up(self, pending: list[MessageRow], attempts: int, exc: Exception) -> None:
        """Close the messages as failed, apologise once and leave an audit row."""
        ids = [row.id for row in pending]
        last = pending[-1]
        partner = self.catalog.get(last.partner_id) if last.partner_id else None
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
        reply_id = await self.store.finish_turn(ids, None, apology, "failed")
        await self.store.audit(
            "gateway",
            "turn_failed",
            chat=last.chat_key,
            messages=ids,
            attempts=attempts,
            error=storable(f"{type(exc).__name__}: {exc}")[:ERROR_DETAIL_CHARS],
        )
        chat = await self.store.chat(last.chat_key)
        if chat is not None:
            answered = last.platform_message_id
            await self.delivery.send(
                PendingReply(reply_id, chat, TURN_FAILED, last.partner_id, answered)
            )

    async def _resting(
        self, conversation: Conversation, session: SessionRow, pending: list[MessageRow]
    ) -> bool:
        """Over a budget or rate limit: the resting line once, then quiet — no model call."""
        if self.budget is None:
            return False
        speaker = conversation.speaker
        rest = await self.budget.check(
            conversation.partner, conversation.chat.chat_key, speaker.user_key, speaker.is_owner
        )
        if rest is None:
            return False
        ids = [row.id for row in pending]
        logger.info("partner resting (%s) in %s", rest.reason, conversation.chat.chat_key)
        if rest.line is None:
            await self.store.close_unanswered(ids, session.id)
            return True
        partner = conversation.partner
        assert partner is not None  # only partners rest
        reply = NewMessage(
            chat_key=conversation.chat.chat_key,
            role="assistant",
            text=rest.line,
            audience=audience_for(conversation.chat, speaker),
            status="delivering",
            session_id=session.id,
            partner_id=partner.id,
            speaker=partner.name,
        )
        reply_id = await self.store.finish_turn(ids, session.id, reply)
        answered = pending[-1].platform_message_id
        await self.delivery.send(
            PendingReply(reply_id, conversation.chat, rest.line, partner.id, answered)
        )
        return True

    async def _conversation(self, last: MessageRow) -> Conversation | None:
        if last.user_key is None:
            return None
        chat, user = await self.store.chat_and_user(last.chat_key, last.user_key)
        if chat is None:
            return None
        partner = None
        if last.partner_id is not None:
            partner = self.catalog.get(last.partner_id)
            if partner is None:
                return None
        name = (user["display_name"] if user else "") or last.speaker or "someone"
        speaker = Speaker(last.user_key, name, self.is_owner(last.user_key))
        return Conversation(chat, partner, speaker)

    async def _close_orphans(self, pending: list[MessageRow]) -> None:
        for row in pending:
            await self.store.set_status(row.id, "failed")

    async def _prepare(self, conversation: Conversation, pending: list[MessageRow]) -> Prepared:
        """Voice notes transcribed, photos seen or described (``bot/media.py``), with a
        typing indicator meanwhile; their cost booked."""
        if self.media is None:
            return Prepared(list(pending))
        async with self._typing(conversation.chat):
            prepared = await self.media.prepare(
                conversation.chat.platform, conversation.partner, pending
            )
        partner_id = conversation.partner.id if conversation.partner else OWNER_AUDIENCE
        await book(self.store, self.config.usage_day(self.clock()), partner_id, prepared.spent)
        return prepared

    async def _unheard(
        self, conversation: Conversation, session: SessionRow, pending: list[MessageRow]
    ) -> None:
        """Only voice notes nobody could transcribe: one polite line a day per user, then
        quiet — the notes stay in the conversation, unanswered."""
        ids = [row.id for row in pending]
        speaker = conversation.speaker
        now = datetime.fromtimestamp(self.clock(), self.config.owner_timezone())
        day_start = now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        told = await self.store.last_rest_notice("voice", speaker.user_key)
        if told is not None and told >= day_start:
            await self.store.close_unanswered(ids, session.id)
            return
        await self.store.note_rest_notice("voice", speaker.user_key)
        partner = conversation.partner
        reply = NewMessage(
            chat_key=conversation.chat.chat_key,
            role="notice",
            text=VOICE_UNHEARD,
            audience=audience_for(conversation.chat, speaker),
            status="delivering",
            session_id=session.id,
            partner_id=partner.id if partner else None,
            speaker=partner.name if partner else "assistant",
        )
        reply_id = await self.store.finish_turn(ids, session.id, reply)
        answered = pending[-1].platform_message_id
        await self.delivery.send(
            PendingReply(reply_id, conversation.chat, VOICE_UNHEARD, reply.partner_id, answered)
        )

    async def _answer(
        self,
        conversation: Conversation,
        session: SessionRow,
        prepared: Prepared,
        stream: ReplyStream | None,
    ) -> NewMessage:
        chat, partner, speaker = conversation.chat, conversation.partner, conversation.speaker
        pending = prepared.rows
        timezone = self._timezone(partner)
        settings = self.memory_settings()
        history = history_window(
            await self.sessions.history(session, settings.carry_turns), settings.history_chars
        )
        context: list[MessageRow] = []
        if chat.kind != "dm":
            since = history[-1].id if history else 0
            context = await self.store.recent_context(
                chat.chat_key, since, self.config.access.group_context_messages
            )
        transcript = None
        if partner is None:
            transcript = await load_transcripts(self.store, self.catalog, session.id, timezone)
        notes = dict(await self.media.notes(history)) if self.media is not None else {}
        notes.update(prepared.notes)
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
            reactions=await self.store.recent_reactions(
                chat.chat_key,
                partner.id if partner else None,
                history[-1].id if history else 0,
                MAX_REACTIONS_SHOWN,
            ),
            after_history=await self._after_history(conversation, history, pending),
        )
        surface, ctx = self._tools(conversation, session, pending[-1])
        model = (partner.preset.model if partner else None) or self.config.llm.model
        role, text = "assistant", EMPTY_ANSWER
        actions: tuple[NewMedia, ...] = ()
        try:
            async with self._typing(chat):
                output = await self._unless_stopped(
                    chat.chat_key,
                    self.chat_loop.run(
                        turn,
                        surface,
                        ctx,
                        model=model,
                        on_delta=_accumulate(stream) if stream else None,
                    ),
                )
            text, actions = markers.acted_on(
                output.text or EMPTY_ANSWER,
                lambda name: None if partner is None else partner.sticker(name, chat.platform),
            )
            await self._record_usage(
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
        return NewMessage(
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

    async def _unless_stopped(self, chat_key: str, work: Awaitable[T]) -> T:
        """``work``, unless :meth:`stop` is called for this chat first: then it is cancelled
        and TurnStopped raised."""
        requested = self._stops[chat_key] = asyncio.Event()
        running = asyncio.ensure_future(work)
        stopping = asyncio.create_task(requested.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self._stops.get(chat_key) is requested:
                del self._stops[chat_key]
            stopping.cancel()
            if not running.done():
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        if running.cancelled() or (requested.is_set() and running.exception() is not None):
            raise TurnStopped  # what a cancelled model call raises on its way out is no news
        return running.result()

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
        await self._record_usage(
            partner,
            "consult",
            output.model,
            output.usage.prompt_tokens,
            output.usage.completion_tokens,
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

    async def _record_usage(
        self, partner: Partner | None, kind: str, model: str, prompt: int, completion: int
    ) -> None:
        await self.store.add_usage(
            self.config.usage_day(self.clock()),
            partner.id if partner else OWNER_AUDIENCE,
            kind,
            model,
            prompt,
            completion,
        )

    @contextlib.asynccontextmanager
    async def _typing(self, chat: ChatRow) -> AsyncIterator[None]:
        channel = self.channels.get(chat.platform)
        if channel is None:
            yield
            return
        ref = chat_ref(chat)

        async def refresh() -> None:
            await asyncio.sleep(TYPING_DELAY_SECONDS)
            while True:
                with contextlib.suppress(Exception):
                    await channel.typing(ref)
                await asyncio.sleep(TYPING_REFRESH_SECONDS)

        task = asyncio.create_task(refresh())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _accumulate(stream: ReplyStream) -> Delta:
    """Turn model deltas into "the whole text so far" for a reply stream."""
    parts: list[str] = []

    async def on_delta(delta: str) -> None:
        parts.append(delta)
        await stream.push(markers.strip_preview("".join(parts)))

    return on_delta
