"""The gateway's front door: every channel hands each event to :meth:`Gateway.receive`, once.

An update id is checked and recorded here (the platform's repeats are skipped). A message:
who is it (user and chat rows kept current) -> command, addressing and partner decided once
(``bot/gateway/addressing.py``) -> access (owner, DM policy, bound groups) -> a command run
(``bot/gateway/command_runs.py``), or: which partner (``bot/gateway/partner_choice.py``) ->
persisted (deduplicated by platform message id) -> the dispatcher's queue for that chat and
partner (a scene's one queue for all its partners: ``bot/gateway/scenes.py``). A group message
that addresses no partner goes to the speak gate (``bot/gateway/speak_gate.py``); one nobody
speaks to is context for the next answered turn, as are commands the sender may not run there
(an unknown one, ``/admin`` from anyone but the owner), even addressed to the bot. What a
channel must know goes to it as a view (``bot/gateway/views.py``), never asked per message.

Nothing is fetched from a platform for a message before this decides who sent it: channels
hand files in by reference, and only a turn (voice, photos) or an owner command (a document)
fetches one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from adapters.base import (
    Channel,
    MediaChannel,
    NotStored,
    OwnerMenuChannel,
    RefetchingChannel,
)
from bot.admin.services import AdminServices
from bot.commands.table import is_user_command
from bot.config.model import Config
from bot.delivery.greeter import Greeter
from bot.delivery.notices import Notices
from bot.events import ChatRef, Event, Inbound, Reaction, Unreadable, Unsupported
from bot.gateway import scenes
from bot.gateway.access import Access
from bot.gateway.addressing import Command, as_read, command_of, read_group
from bot.gateway.claims import CLAIM_COMMANDS, CLAIM_REFUSED, CLAIMED, OwnerClaims
from bot.gateway.command_runs import CommandRuns
from bot.gateway.pairing_notices import Announce, PairingNotices
from bot.gateway.partner_choice import PartnerChoice
from bot.gateway.reactions import keep_reaction
from bot.gateway.scene_costs import SceneCosts, group_of
from bot.gateway.speak_gate import SpeakGate
from bot.gateway.views import ChannelViews
from bot.store import ChatRow, NewMedia, NewMessage, Store, StoreUnavailable, UserRow
from bot.turn.confirmations import Confirmations
from bot.turn.media_limits import cut_text, over_limit
from bot.turn.sessions import Sessions, Speaker, audience_for
from bot.workers.dispatcher import Dispatcher
from bot.workers.queue_keys import queue_key, scene_key
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from partners.user_memory import UserMemory

logger = logging.getLogger(__name__)

__all__ = ["Announce", "Gateway"]

MEDIA_TAGS = {"voice": "[voice message]", "photo": "[photo]"}
"""What stands for a voice note or photo in group chatter nobody addressed (not fetched)."""
UNSUPPORTED_REPLY = "Sorry — I can't open that kind of file. Could you write it down for me?"


@contextlib.contextmanager
def storing() -> Iterator[None]:
    """The database refusing a write or read (a full disk, an I/O error) as NotStored."""
    try:
        yield
    except StoreUnavailable as exc:
        raise NotStored(str(exc)) from exc


class Gateway:
    def __init__(
        self,
        config: Config,
        store: Store,
        catalog: PartnerCatalog,
        access: Access,
        dispatcher: Dispatcher,
        channels: dict[str, Channel],
        sessions: Sessions,
        user_memory: UserMemory,
        claims: OwnerClaims,
        announce: Announce,
        stop_turn: Callable[[str], bool],
        notices: Notices,
        greeter: Greeter | None = None,
        admin: AdminServices | None = None,
        confirmations: Confirmations | None = None,
        gate: SpeakGate | None = None,
    ) -> None:
        self.config = config
        self.confirmations = confirmations
        """Questions a turn asked before an MCP tool runs; a press or a yes or no answers one."""
        self.claims = claims
        self.store = store
        self.catalog = catalog
        self.access = access
        self.dispatcher = dispatcher
        self.channels = channels
        self.sessions = sessions
        self.user_memory = user_memory
        self._stop_turn = stop_turn
        self.greeter = greeter
        """Opens a conversation with a character card's greeting; None: no greetings."""
        self.notices = notices
        """Command answers and notices, sent directly: the owner-notices part built first
        (``bot/delivery/notices.py``), shared with delivery and reviews."""
        self.pairing = PairingNotices(notices, store, announce)
        self.partners = PartnerChoice(config, store, catalog, self.notices)
        self.views = ChannelViews(channels, store, catalog, access.is_owner)
        self.commands = CommandRuns(
            config, store, catalog, access, sessions, user_memory, channels, self.notices,
            self.partners, greeter,
        )  # fmt: skip
        self.gate = gate or SpeakGate(config, store)
        """Who speaks to talk nobody addressed (none given: one that never asks the model)."""
        self.costs = SceneCosts(config, store)
        self.bot_usernames: dict[str, str] = {}
        self.can_read_groups: dict[str, bool] = {}
        self.admin = admin
        """What the owner's /admin commands reach; None: no owner commands beyond the table."""

    async def start_channels(self) -> None:
        """Give every channel its view, then connect it."""
        await self.views.publish()
        for channel in self.channels.values():
            await channel.start(self)

    # ---- what a channel calls (adapters.base.Receiver) ---------------------------------

    def note_bot_identity(
        self, platform: str, username: str | None, can_read_groups: bool | None
    ) -> None:
        if username:
            self.bot_usernames[platform] = username
        if can_read_groups is not None:
            self.can_read_groups[platform] = can_read_groups

    async def last_inbound_at(self, chat: ChatRef) -> float | None:
        return await self.store.last_inbound_at(chat.key)

    async def stop_turn(self, chat: ChatRef) -> bool:
        return self._stop_turn(chat.key)

    async def receive(self, event: Event) -> None:
        """Handle one event; one with an update id once, however often it comes (recorded
        only once handled: a crash in between leaves it to be handled again, and a message
        is deduplicated by its id then). Safe to call twice with the same message.

        Raises NotStored when the database cannot take it (a full disk, an I/O error): the
        channel leaves it with the platform, to be offered again once it can."""
        with storing():
            if isinstance(event, Unreadable):
                await self.store.reject_update(event.platform, event.update_id)
                return
            platform, update_id = event.chat.platform, event.update_id
            if update_id is not None and await self.store.update_seen(platform, update_id):
                logger.info("%s: update %s seen before; skipped", platform, update_id)
                return
            if isinstance(event, Reaction):
                await keep_reaction(self.store, event)
            elif isinstance(event, Unsupported):
                if event.chat.is_dm and not event.late:
                    await self.reply(event.chat, UNSUPPORTED_REPLY, event.message_id)
            else:
                await self._receive(event)
            if update_id is not None:
                await self.store.seen_update(platform, update_id)

    # ---- one message ----------------------------------------------------------------------

    async def _receive(self, inbound: Inbound) -> None:
        sender, chat = inbound.sender, inbound.chat
        if (text := cut_text(inbound.text)) != inbound.text:
            inbound = replace(inbound, text=text)
        await self.store.upsert_user(
            sender.key, sender.platform, sender.user_id, sender.display_name, sender.username
        )
        await self.store.upsert_chat(
            chat.key, chat.platform, chat.chat_id, chat.thread_id, chat.kind, chat.title
        )
        if self.confirmations is not None and await self.confirmations.take(inbound):
            return  # the answer to a turn's question (whichever worker asked), not a message
        is_owner = self.access.is_owner(sender.key)
        command = command_of(inbound, self.bot_usernames.get(chat.platform))
        if command is not None and inbound.late:
            return  # a command fetched after a reconnect, too old to run now
        inbound = as_read(inbound, command)
        if chat.is_dm:
            await self._receive_dm(inbound, command, is_owner)
            return
        bound = await self.partners.bound(chat)
        await self.views.check_group(chat, bound)
        ignored = not bound and not (is_owner and command)
        if ignored or (not is_owner and await self.access.is_blocked(sender)):
            return
        reading = read_group(inbound, bound, self.bot_usernames.get(chat.platform))
        addressed = reading.addressed and not inbound.late
        if command is not None and not is_owner and not is_user_command(command[0]):
            # An unknown word or /admin from anyone but the owner is chatter in a group,
            # addressed to the bot or not: one silence for both, so nobody learns there
            # which commands exist (in a DM both get the unknown-command answer).
            command, addressed = None, False
        if command is not None and (addressed or is_owner):
            await self._command_once(inbound, command, is_owner)
            return
        partner_id, group = reading.partner_id, group_of(chat.platform, chat.chat_id)
        unaddressed = not addressed and not inbound.late  # while a scene's budget lasts
        if unaddressed and await self.costs.may_answer_unaddressed(group, bound):
            if not self.config.access.mention_gating:  # a bound partner answers everything
                addressed = True
            elif joiner := await self.gate.joiner(inbound, bound):
                partner_id, addressed = joiner, True  # a partner speaks unaddressed (speak_gate.py)
        if scenes.is_scene(bound):
            await self._scene_message(inbound, is_owner, bound, partner_id, addressed)
            return
        await self._converse(inbound, is_owner, partner_id, addressed, None)

    async def _scene_message(
        self,
        inbound: Inbound,
        is_owner: bool,
        cast: list[Partner],
        partner_id: str | None,
        addressed: bool,
    ) -> None:
        """A person spoke in a scene: the partner turns still waiting give way, and the
        message waits for each partner it addresses, in order (``bot/gateway/scenes.py``)."""
        await scenes.preempt(self.store, inbound.chat.key)
        addressed, answering = await scenes.answering(
            self.store, inbound, cast, partner_id, addressed
        )
        await self._converse(inbound, is_owner, answering[0], addressed, None, answering[1:])

    async def _receive_dm(self, inbound: Inbound, command: Command | None, is_owner: bool) -> None:
        chat, sender = inbound.chat, inbound.sender
        if command and await self._claim(inbound, *command):
            return
        row: ChatRow | None = None
        user: UserRow | None = None
        if not is_owner:  # anyone but the owner has their access stored: read it with the chat
            row, user = await self.store.chat_and_user(chat.key, sender.key)
        verdict = await self.access.check_dm(sender, user)
        if not verdict.allowed:
            if verdict.owner_notice and verdict.code:
                await self.pairing.pairing_request(sender, verdict.owner_notice, verdict.code)
            if verdict.reply:
                await self.reply(chat, verdict.reply, inbound.message_id)
            return
        if command is not None:
            await self._command_once(inbound, command, is_owner)
            return
        row = row or await self.store.chat(chat.key)
        assert row is not None
        if await self.partners.gone(inbound, row):
            return
        partner_id = await self.partners.for_dm(row, is_owner)
        if partner_id is False:
            await self.partners.ask(inbound)
            return
        chosen = partner_id if isinstance(partner_id, str) else None
        await self._converse(inbound, is_owner, chosen, not inbound.late, row)

    async def _claim(self, inbound: Inbound, name: str, args: list[str]) -> bool:
        """``/claim CODE`` (or the deep link's ``/start CODE``) in a DM while nobody owns this
        platform: answered here, whatever the code. True if it was such a claim."""
        platform = inbound.chat.platform
        if name not in CLAIM_COMMANDS or len(args) != 1 or not self.claims.unclaimed(platform):
            return False
        claimed = await self.claims.redeem(inbound.sender, args[0])
        text = CLAIMED.format(platform=platform.capitalize()) if claimed else CLAIM_REFUSED
        await self.reply(inbound.chat, text, inbound.message_id)
        channel = self.channels.get(platform)
        if claimed:
            await self.views.publish()
        if claimed and isinstance(channel, OwnerMenuChannel):
            await channel.show_owner_commands(inbound.sender.user_id)
        return True

    async def _converse(
        self,
        inbound: Inbound,
        is_owner: bool,
        partner_id: str | None,
        addressed: bool,
        row: ChatRow | None,
        also: Sequence[str | None] | None = None,
    ) -> None:
        """Store a message that is part of a conversation and queue it for a turn when it
        addresses a partner; ``row`` is its chat as stored, if the caller read it already.
        In a scene (``also`` given: the other partners that answer it, in order) it waits on
        the scene's one key, once for each partner (``bot/gateway/scenes.py``)."""
        chat = inbound.chat
        row = row or await self.store.chat(chat.key)
        assert row is not None
        if inbound.media is not None:
            within = await self._media_within_limits(inbound, addressed)
            if within is None:
                return
            inbound = within
        speaker = Speaker(inbound.sender.key, inbound.sender.display_name, is_owner)
        key = queue_key(chat.key, partner_id) if also is None else scene_key(chat.key)
        media = inbound.media
        message = NewMessage(
            chat_key=chat.key,
            role="user" if addressed else "context",
            text=inbound.text,
            audience=audience_for(row, speaker),
            status="pending" if addressed else "done",
            dedup_key=f"{chat.platform}:{chat.chat_id}:{inbound.message_id}",
            queue_key=key if addressed else None,
            partner_id=partner_id,
            platform_message_id=inbound.message_id,
            user_key=inbound.sender.key,
            speaker=inbound.sender.display_name,
            created_at=inbound.time.timestamp(),
            media=()
            if media is None
            else (
                NewMedia(
                    media.kind, media.ref, media.mime, media.seconds, media.size, media.filename
                ),
            ),
        )
        store = self.store.add_message_with_media if message.media else self.store.add_message
        stored = await store(message) is not None
        for other in (also or ()) if addressed else ():
            # each its own dedup key: a message handed over again adds the ones it missed
            copy = replace(message, partner_id=other, dedup_key=f"{message.dedup_key}#{other}")
            stored = await store(copy) is not None or stored
        if not stored:
            logger.info("duplicate message %s in %s ignored", inbound.message_id, chat.key)
            return
        if addressed:
            self.dispatcher.notify(key)

    async def _media_within_limits(self, inbound: Inbound, addressed: bool) -> Inbound | None:
        """The message as it is stored: a voice note or photo by reference, if it is within
        the limits; else the user is told, and only a caption (if any) goes on, alone.
        Unaddressed group chatter keeps a tag instead: nobody fetches what nobody asked for."""
        media = inbound.media
        assert media is not None
        if not addressed:
            return replace(
                inbound, text=f"{MEDIA_TAGS[media.kind]} {inbound.text}".strip(), media=None
            )
        channel = self.channels.get(inbound.chat.platform)
        problem = over_limit(
            media,
            self.config.speech.max_seconds,
            channel.max_download_bytes if isinstance(channel, MediaChannel) else None,
        )
        if problem is None:
            return inbound
        await self.reply(inbound.chat, problem, inbound.message_id)
        return replace(inbound, media=None) if inbound.text.strip() else None

    async def _command_once(self, inbound: Inbound, command: Command, is_owner: bool) -> None:
        """Run a command at most once per message id from a channel that may hand a message
        over again with no update id to tell (a Discord message fetched again after a
        reconnect). Recorded only once it has run: a stop in between runs it again (it may
        answer twice; recorded first and cut off, it would never answer). Then the channels
        learn what it changed (bindings, owners)."""
        platform = inbound.chat.platform
        refetching = isinstance(self.channels.get(platform), RefetchingChannel)
        seen = f"command:{inbound.message_id}" if refetching and not inbound.update_id else None
        if seen is not None and await self.store.update_seen(platform, seen):
            return
        admin = self.admin if is_owner else None
        can_read_groups = self.can_read_groups.get(platform)
        await self.commands.run(inbound, *command, is_owner, admin, can_read_groups)
        if seen is not None:
            await self.store.seen_update(platform, seen)
        await self.views.publish()

    # ---- direct sends (command answers, notices: bot/delivery/notices.py) --------------

    async def reply(
        self, chat: ChatRef, text: str, reply_to: str | None = None, choices: tuple = ()
    ) -> None:
        await self.notices.reply(chat, text, reply_to, choices)

    async def announce_approvals(self) -> None:
        await self.pairing.announce_approvals()

    async def notify_user(self, user_key: str, text: str) -> None:
        await self.notices.notify_user(user_key, text)

    async def notify_owner(self, platform: str, text: str) -> None:
        await self.notices.notify_owner(platform, text)
