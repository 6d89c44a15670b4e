"""Working one queue key: pending messages -> session -> chat loop -> recorded reply -> delivery.

Every inbound message that calls for an answer belongs to exactly one turn, and every turn
records exactly one reply (docs/architecture.md "Decisions": one turn, one reply). The reply and the
closing of its inbound messages are one transaction, so a crash before it re-runs the turn
(nothing was sent yet) and a crash after it only re-delivers the remaining chunks.

``TurnRunner`` orchestrates; beside it live who is talking (``bot/turn/conversation.py``), what the
model reads in a turn (``bot/turn/input.py``), the turns answered without the model
(``bot/turn/quiet.py``), failure counting and the apology (``bot/turn/failures.py``),
stopping a turn (``bot/turn/stops.py``), the typing indicator and reply preview
(``bot/turn/typing.py``) and the owner's consults of partners (``bot/turn/consults.py``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import replace

from adapters.base import Channel, MediaChannel, ReplyStream
from bot.config.memory import MemoryConfig
from bot.config.model import Config
from bot.delivery.reply import PendingReply, chat_ref
from bot.delivery.sender import Delivery
from bot.gateway.access import OwnerCheck
from bot.services.llm import LLMError
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
from bot.text import markers
from bot.text.markers import EMPTY_ANSWER
from bot.turn.budget import Budget
from bot.turn.chat import ChatLoop, TurnInput, TurnOutput
from bot.turn.consults import Consults
from bot.turn.conversation import Conversation, resolve_conversation
from bot.turn.failures import failed_attempt
from bot.turn.input import MAX_REACTIONS_SHOWN, TurnPrompt
from bot.turn.media import MediaReader, Prepared, book
from bot.turn.quiet import resting, unheard
from bot.turn.sessions import (
    OWNER_AUDIENCE,
    TITLE_CHARS,
    Sessions,
    Speaker,
    audience_for,
    search_audiences,
)
from bot.turn.stops import STOPPED, TurnStopped, TurnStops
from bot.turn.tools import ToolRegistry, ToolSurface
from bot.turn.typing import accumulate, typing
from bot.turn.voice_replies import VoiceReplies
from bot.workers.dispatcher import Worked
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
    TurnTools,
    user_memory_file,
)

logger = logging.getLogger(__name__)

PARTNER_GONE = (
    "The partner you wrote to ({partner}) is no longer here, so nobody read that message. "
    "Choose who to talk with (/partner), then write again."
)
"""Said instead of a reply to messages whose partner was deleted before their turn."""
PARTNER_BROKEN = (
    "The partner you wrote to ({partner}) cannot answer right now (its settings do not load); "
    "the owner can fix it. Write again later."
)
"""Said instead of a reply to messages whose partner does not load (a broken preset.yml)."""
APOLOGY = "Sorry — I can't think right now (my model is unreachable). Please try again in a bit."


def _lost(queue_key: str, lost: LeaseLost) -> Worked:
    logger.warning("turn for %s stopped: %s", queue_key, lost)
    return Worked.LOST


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
        self.prompt = TurnPrompt(
            config, store, catalog, sessions, self.memory_settings, media, lore
        )
        """Gathers what the model reads in a turn."""
        self.consults = Consults(
            config,
            store,
            catalog,
            sessions,
            chat_loop,
            self._tools,
            self._usage,
            budget,
            self.memory_settings,
        )
        """Runs the owner's consults of partners (consult_partner, ``/admin consult``)."""
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
        """One turn, top-down: who is talking and in which session, the turn's voice notes
        and photos read, the prompt built, the model's answer, then the reply recorded with
        the closing of its messages and delivered."""
        pending = context.pending
        conversation = await self._conversation(context)
        if conversation is None:
            await self._close_orphans(pending, lease)
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
        await self._title(session, prepared)
        speak = await self._speaks(conversation, prepared)
        stream = None if speak else self._stream(conversation, pending[-1])
        turn = await self.prompt.build(conversation, session, prepared, context, self.clock())
        reply, usage = await self._answer(conversation, session, turn, stream)
        if speak and reply.role == "assistant" and reply.text:
            reply = replace(reply, media=(*reply.media, NewMedia("speak", "voice")))
        reply_id = await self._record(pending, session, reply, usage, lease)
        await self.delivery.send(
            self._pending_reply(conversation, reply_id, reply, pending[-1], lease), stream
        )
        if conversation.partner is not None:
            await self.reviewer.after_turn(session, self.memory_settings().history_chars)

    async def _conversation(self, context: TurnContext) -> Conversation | None:
        """Who talks to whom in this turn; None (logged) if its chat or partner is gone."""
        pending = context.pending
        conversation = await resolve_conversation(
            self.catalog, self.is_owner, pending[-1], context.chat, context.user
        )
        if conversation is None:
            logger.error(
                "queue %s: chat or partner is gone; closing %d messages",
                pending[-1].chat_key,
                len(pending),
            )
        return conversation

    async def _close_orphans(self, pending: list[MessageRow], lease: Lease) -> None:
        """Close messages nobody can answer. Those for a partner that is gone (deleted since
        they came) get one line saying so, never an answer from someone else."""
        last = pending[-1]
        chat = await self.store.chat(last.chat_key)
        partner_id = last.partner_id
        if partner_id is None or chat is None or self.catalog.get(partner_id) is not None:
            for row in pending:
                await self.store.set_status(row.id, "failed")
            return
        broken = partner_id in self.catalog.errors
        text = (PARTNER_BROKEN if broken else PARTNER_GONE).format(partner=partner_id)
        notice = NewMessage(
            chat_key=last.chat_key,
            role="notice",
            text=text,
            audience=last.audience,
            status="delivering",
            partner_id=last.partner_id,
            speaker="assistant",
        )
        ids = [row.id for row in pending]
        reply_id = await self.store.finish_turn(ids, None, notice, "failed", lease=lease)
        answered = last.platform_message_id
        await self.delivery.send(
            PendingReply(reply_id, chat, text, last.partner_id, answered, lease=lease)
        )

    async def _prepare(
        self,
        conversation: Conversation,
        pending: list[MessageRow],
        media: dict[int, list[MediaRow]],
    ) -> Prepared:
        """Voice notes transcribed, photos seen or described (``bot/turn/media.py``), with a
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

    async def _title(self, session: SessionRow, prepared: Prepared) -> None:
        """A session opened by a voice note is titled by its transcript."""
        if not session.title:
            title = " ".join(prepared.rows[0].text.split())[:TITLE_CHARS]
            await self.store.set_session_title(session.id, title)

    async def _speaks(self, conversation: Conversation, prepared: Prepared) -> bool:
        """Whether the reply is spoken (``/voice``): only where the channel sends voice."""
        channel = self.channels.get(conversation.chat.platform)
        return (
            self.voice is not None
            and isinstance(channel, MediaChannel)
            and await self.voice.wanted(conversation.speaker.user_key, prepared.spoken)
        )

    def _stream(self, conversation: Conversation, last: MessageRow) -> ReplyStream | None:
        """The live preview of a written reply (a spoken one is sent whole, not previewed)."""
        channel = self.channels.get(conversation.chat.platform)
        if channel is None:
            return None
        return channel.open_stream(chat_ref(conversation.chat), last.platform_message_id)

    async def _answer(
        self,
        conversation: Conversation,
        session: SessionRow,
        turn: TurnInput,
        stream: ReplyStream | None,
    ) -> tuple[NewMessage, NewUsage | None]:
        """The model's answer with the turn's tools, as the reply to record, and what its
        model calls cost (None: no model answered — it failed, or the chat stopped it)."""
        chat, partner = conversation.chat, conversation.partner
        surface, ctx = self._tools(conversation, session, turn.new_messages[-1])
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
            usage = self._usage(partner, "chat", output)
        except LLMError as exc:
            who = f"partner {partner.id}, model {model}" if partner else f"model {model}"
            logger.warning("turn in %s (%s) failed: %s", chat.chat_key, who, exc)
            role, text = "notice", APOLOGY
        except TurnStopped:
            logger.info("turn in %s stopped by the chat", chat.chat_key)
            role, text = "notice", STOPPED
        return self._reply(conversation, session, role, text, actions), usage

    @staticmethod
    def _reply(
        conversation: Conversation,
        session: SessionRow,
        role: str,
        text: str,
        actions: tuple[NewMedia, ...],
    ) -> NewMessage:
        """The reply as it is recorded, before its delivery."""
        chat, partner = conversation.chat, conversation.partner
        return NewMessage(
            chat_key=chat.chat_key,
            role=role,
            text=text,
            audience=audience_for(chat, conversation.speaker),
            status="delivering",
            session_id=session.id,
            partner_id=partner.id if partner else None,
            speaker=partner.name if partner else "assistant",
            media=actions,
        )

    async def _record(
        self,
        pending: list[MessageRow],
        session: SessionRow,
        reply: NewMessage,
        usage: NewUsage | None,
        lease: Lease,
    ) -> int:
        """The reply recorded and the turn's messages closed, in one transaction; a model
        that failed closes them as failed (a stopped turn is done)."""
        failed = reply.role == "notice" and reply.text != STOPPED
        return await self.store.finish_turn(
            [row.id for row in pending],
            session.id,
            reply,
            "failed" if failed else "done",
            usage=usage,
            lease=lease,
        )

    @staticmethod
    def _pending_reply(
        conversation: Conversation, reply_id: int, reply: NewMessage, last: MessageRow, lease: Lease
    ) -> PendingReply:
        """The recorded reply as delivery sends it, answering the turn's last message."""
        partner_id = conversation.partner.id if conversation.partner else None
        return PendingReply(
            reply_id,
            conversation.chat,
            reply.text,
            partner_id,
            last.platform_message_id,
            actions=tuple(MediaRow(reply_id, m.kind, m.ref) for m in reply.media),
            lease=lease,
        )

    def _tools(
        self, conversation: Conversation, session: SessionRow, last: MessageRow
    ) -> tuple[ToolSurface, ToolContext]:
        """The tools a turn mounts, answering ``last``: a partner's forced and configurable
        tools with the owner's memory tools suppressed, or the owner assistant's memory tools
        and consult_partner with this turn's consult budget."""
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
            ctx = ToolContext.for_owner(turn, consult, self.config.owner.consult_budget)
            surface = self.registry.surface(
                forced=(*OWNER_MEMORY_TOOL_NAMES, "consult_partner"), owner="owner assistant"
            )
            return surface, ctx
        ctx = ToolContext.for_partner(
            turn,
            partner,
            write_file=self._write_file(partner, speaker),
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
        return surface, ctx

    async def consult(
        self, owner_chat: ChatRow, owner: Speaker, partner_id: str, question: str
    ) -> str:
        """Run a partner's own chat loop on the owner's question (``bot/turn/consults.py``)."""
        return await self.consults.consult(owner_chat, owner, partner_id, question)

    @staticmethod
    def _write_file(partner: Partner, speaker: Speaker) -> MemoryFile:
        """per_user: what a user says lands in that user's file; only the owner's own conversations
        change the partner's MEMORY.md (docs/architecture.md "Decisions": per-user writes)."""
        if partner.per_user and not speaker.is_owner:
            return user_memory_file(partner, speaker.user_key)
        return MemoryFile(partner.dir, "MEMORY.md")

    def _usage(self, partner: Partner | None, kind: str, output: TurnOutput) -> NewUsage:
        """The tokens a model answer spent, booked on today for the partner (or the owner's
        assistant)."""
        return NewUsage(
            self.config.usage_day(self.clock()),
            partner.id if partner else OWNER_AUDIENCE,
            kind,
            output.model,
            output.usage.prompt_tokens,
            output.usage.completion_tokens,
        )
