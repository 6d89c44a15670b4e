"""Working one queue key: pending messages -> session -> chat loop -> recorded reply -> delivery.

Every inbound message that calls for an answer belongs to exactly one turn, and every turn
records exactly one reply (docs/architecture.md "Decisions": one turn, one reply). The reply and the
closing of its inbound messages are one transaction, so a crash before it re-runs the turn
(nothing was sent yet) and a crash after it only re-delivers the remaining chunks.

``TurnRunner`` orchestrates; beside it live who is talking (``bot/turn/conversation.py``), what the
model reads in a turn (``bot/turn/input.py``), the turns answered without the model
(``bot/turn/quiet.py``), what a turn records (``bot/turn/outcome.py``), the tools it mounts
(``bot/turn/tool_mount.py``), failure counting and the apology (``bot/turn/failures.py``),
stopping a turn (``bot/turn/stops.py``), the typing indicator and reply preview
(``bot/turn/typing.py``) and the owner's consults of partners (``bot/turn/consults.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from adapters.base import Channel, MediaChannel, ReplyStream
from bot.config.memory import MemoryConfig
from bot.config.model import Config
from bot.delivery.reply import chat_ref
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
from bot.turn.mcp_tools import McpTools
from bot.turn.media import MediaReader, Prepared, book
from bot.turn.outcome import close_orphans, pending_reply, record_turn, reply_message
from bot.turn.quiet import resting, unheard
from bot.turn.scene_turns import SceneTurns
from bot.turn.sessions import (
    OWNER_AUDIENCE,
    TITLE_CHARS,
    Sessions,
    Speaker,
)
from bot.turn.stops import STOPPED, TurnStopped, TurnStops
from bot.turn.tool_mount import ToolMount
from bot.turn.tools import ToolRegistry
from bot.turn.typing import accumulate, typing
from bot.turn.voice_replies import VoiceReplies
from bot.workers.dispatcher import Worked
from bot.workers.queue_keys import is_scene_key
from partners.catalog import PartnerCatalog
from partners.lore_books import LoreLibrary
from partners.memory import MemoryFile, MemoryStore
from partners.persona import Partner
from partners.recall import Recall
from partners.review import Reviewer

logger = logging.getLogger(__name__)

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
        mcp: McpTools | None = None,
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
        self.tools = ToolMount(
            store,
            memory,
            owner_file,
            self.recall,
            registry,
            sessions,
            self.consult,
            config.owner.consult_budget,
            mcp,
        )
        """The tools each turn mounts (a partner's MCP tools among them)."""
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
            self.tools.for_turn,
            self._usage,
            budget,
            self.memory_settings,
        )
        """Runs the owner's consults of partners (consult_partner, ``/admin consult``)."""
        self.scenes = SceneTurns(config, store, catalog)
        """The turns scene partners give each other (``bot/turn/scene_turns.py``)."""
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
            await close_orphans(self.store, self.catalog, self.delivery, pending, lease)
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
        scene = is_scene_key(lease.queue_key)
        turn = await self.prompt.build(
            conversation, session, prepared, context, self.clock(), scene
        )
        reply, usage = await self._answer(conversation, session, turn, stream)
        if scene and usage is not None:
            usage = await self.scenes.booked(conversation.chat, usage)
        if speak and reply.role == "assistant" and reply.text:
            reply = replace(reply, media=(*reply.media, NewMedia("speak", "voice")))
        follow = []
        if scene and reply.role == "assistant":
            follow = await self.scenes.handovers(conversation, pending, reply.text, usage)
        reply_id = await record_turn(self.store, pending, session, reply, usage, lease, follow)
        await self.delivery.send(
            pending_reply(conversation, reply_id, reply, pending[-1], lease), stream
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
        partner_id = conversation.partner.id if conversation.partner else None
        async with typing(self.channels, conversation.chat, partner_id):
            prepared = await self.media.prepare(
                conversation.chat.platform, conversation.partner, pending, media
            )
        partner_id = partner_id or OWNER_AUDIENCE
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
        partner = conversation.partner
        return channel.open_stream(
            chat_ref(conversation.chat), last.platform_message_id, partner.id if partner else None
        )

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
        surface, ctx = await self.tools.for_turn(conversation, session, turn.new_messages[-1])
        model = (partner.preset.model if partner else None) or self.config.llm.model
        role, text = "assistant", EMPTY_ANSWER
        actions: tuple[NewMedia, ...] = ()
        usage = None
        try:
            async with typing(self.channels, chat, partner.id if partner else None):
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
        return reply_message(conversation, session, role, text, actions), usage

    async def consult(
        self, owner_chat: ChatRow, owner: Speaker, partner_id: str, question: str
    ) -> str:
        """Run a partner's own chat loop on the owner's question (``bot/turn/consults.py``)."""
        return await self.consults.consult(owner_chat, owner, partner_id, question)

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
