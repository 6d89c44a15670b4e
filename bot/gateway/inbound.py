"""The gateway's front door: every channel hands each inbound message to :meth:`receive`.

receive -> who is it (user and chat rows kept current) -> access (owner, DM policy, bound
groups) -> command, or: which partner -> persisted (deduplicated by platform message id) ->
the dispatcher's queue for that chat and partner. Group messages that do not address a
partner are stored as context for the next answered turn, never answered; so are commands
the sender may not run there (an unknown one, ``/admin`` from anyone but the owner), even
addressed to the bot.

Nothing is fetched from a platform for a message before this decides who sent it: channels
hand files in by reference, and only a turn (voice, photos) or an owner command (a document)
fetches one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace

from adapters.base import (
    Channel,
    DeliveryError,
    FileSource,
    MediaChannel,
    NotStored,
    OwnerMenuChannel,
    PhotoChannel,
)
from bot.admin.services import AdminServices
from bot.cli.terminal import printable
from bot.commands.handlers import run_command
from bot.commands.table import is_user_command, parse_command
from bot.commands.types import CommandContext, CommandReply
from bot.config.model import Config
from bot.delivery.greeter import Greeter
from bot.delivery.notices import Notices
from bot.events import ChatRef, Choice, Inbound, Outbound, Reaction, Sender
from bot.gateway.access import APPROVED_WELCOME, Access
from bot.gateway.claims import CLAIM_COMMANDS, CLAIM_REFUSED, CLAIMED, OwnerClaims
from bot.store import ChatRow, NewMedia, NewMessage, Store, StoreUnavailable, UserRow
from bot.text.literal import literal_line
from bot.turn.media_limits import cut_text, over_limit
from bot.turn.sessions import Sessions, Speaker, audience_for
from bot.workers.dispatcher import Dispatcher
from bot.workers.queue_keys import queue_key
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from partners.user_memory import UserMemory

logger = logging.getLogger(__name__)

Announce = Callable[[list[str]], None]
MEDIA_TAGS = {"voice": "[voice message]", "photo": "[photo]"}
"""What stands for a voice note or photo in group chatter nobody addressed (not fetched)."""
REACTION_SNIPPET_CHARS = 80
PARTNER_GONE = (
    "The partner you were talking with ({partner}) is no longer here, so nobody else read "
    "that message. Choose who to talk with, then write again."
)
"""Said once to a user whose chosen partner was deleted, instead of answering as another."""
PARTNER_UNAVAILABLE = (
    "The partner you are talking with ({partner}) cannot answer right now (its settings do "
    "not load); the owner can fix it. Write again later, or choose another."
)
"""Said while the partner a user chose is there but does not load (a broken preset.yml)."""


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
    ) -> None:
        self.config = config
        self.claims = claims
        self.announce = announce
        """Shows lines on the terminal that runs the gateway (pairing with no owner)."""
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
        self.bot_usernames: dict[str, str] = {}
        self.can_read_groups: dict[str, bool] = {}
        self.notices = notices
        """Command answers and notices, sent directly (``bot/delivery/notices.py``)."""
        self.admin = admin
        """What the owner's /admin commands reach; None: no owner commands beyond the table."""

    def note_bot_identity(
        self, platform: str, username: str | None, can_read_groups: bool | None
    ) -> None:
        if username:
            self.bot_usernames[platform] = username
        if can_read_groups is not None:
            self.can_read_groups[platform] = can_read_groups

    async def seen_update(self, platform: str, update_id: str) -> bool:
        with storing():
            return await self.store.seen_update(platform, update_id)

    async def update_seen(self, platform: str, update_id: str) -> bool:
        with storing():
            return await self.store.update_seen(platform, update_id)

    async def reject_update(self, platform: str, update_id: str) -> None:
        with storing():
            await self.store.reject_update(platform, update_id)

    async def partner_names(self, chat: ChatRef) -> list[tuple[str, str]]:
        return [(p.id, p.name) for p in await self._bound_partners(chat)]

    async def bound_chats(self, platform: str) -> list[str]:
        rows = await self.store.bindings(platform)
        return list(dict.fromkeys(row["chat_id"] for row in rows))

    async def last_inbound_at(self, chat: ChatRef) -> float | None:
        return await self.store.last_inbound_at(chat.key)

    async def stop_turn(self, chat: ChatRef) -> bool:
        return self._stop_turn(chat.key)

    def owner_ids(self, platform: str) -> list[str]:
        keys = (key.partition(":") for key in sorted(self.access.is_owner.keys))
        return [user_id for where, _, user_id in keys if where == platform]

    def partner_choices(self) -> list[tuple[str, str]]:
        return [(p.id, p.name) for p in self.catalog.public()]

    async def receive_reaction(self, reaction: Reaction) -> None:
        """A user's reaction to one of a partner's replies, kept as context for the partner's
        next turn in that chat. No model call: nothing is answered now. Reactions to other
        messages, and from people who may not talk here, are not kept. The reacting person is
        named as stored when they last wrote, if they did (a channel may know only their id)."""
        with storing():
            chat, sender = reaction.chat, reaction.sender
            reply = await self.store.reply_for_platform_message(chat.key, reaction.message_id)
            if reply is None:
                return
            user = await self.store.user(sender.key)
            if user is not None and user["access"] == "blocked":
                return
            name = user["display_name"] if user is not None else sender.display_name
            snippet = " ".join(reply.text.split())[:REACTION_SNIPPET_CHARS]
            await self.store.add_message(
                NewMessage(
                    chat_key=chat.key,
                    role="reaction",
                    text=f"{name} reacted {reaction.emoji} to your message “{snippet}”",
                    audience=reply.audience,
                    dedup_key=f"{chat.platform}:{chat.chat_id}:reaction:{reaction.message_id}"
                    f":{sender.user_id}:{reaction.emoji}",
                    partner_id=reply.partner_id,
                    user_key=sender.key,
                    speaker=name,
                    created_at=reaction.time.timestamp(),
                )
            )

    async def receive(self, inbound: Inbound) -> None:
        """Handle one inbound message. Safe to call twice with the same message.

        Raises NotStored when the database cannot take it (a full disk, an I/O error): the
        channel leaves the message with the platform, to be offered again once it can."""
        with storing():
            await self._receive(inbound)

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
        is_owner = self.access.is_owner(sender.key)
        bound = [] if chat.is_dm else await self._bound_partners(chat)
        command = parse_command(inbound.text, self.bot_usernames.get(chat.platform))
        row: ChatRow | None = None
        user: UserRow | None = None
        if chat.is_dm:
            if command and await self._claim(inbound, *command):
                return
            if not is_owner:  # anyone but the owner has their access stored: read it with the chat
                row, user = await self.store.chat_and_user(chat.key, sender.key)
            verdict = await self.access.check_dm(sender, user)
            if not verdict.allowed:
                if verdict.owner_notice and verdict.code:
                    await self._pairing_notice(sender, verdict.owner_notice, verdict.code)
                if verdict.reply:
                    await self.reply(chat, verdict.reply, inbound.message_id)
                return
        else:
            ignored = not bound and not (is_owner and command)
            if ignored or (not is_owner and await self.access.is_blocked(sender)):
                return
            if command is not None and not is_owner and not is_user_command(command[0]):
                # An unknown word or /admin from anyone but the owner is chatter in a group,
                # addressed to the bot or not: one silence for both, so nobody learns there
                # which commands exist (in a DM both get the unknown-command answer).
                inbound, command = replace(inbound, addressed=False), None
        if command is not None and (chat.is_dm or inbound.addressed or is_owner):
            await self._command(inbound, command[0], command[1], is_owner)
            return
        await self._converse(inbound, is_owner, bound, row)

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
        if claimed and isinstance(channel, OwnerMenuChannel):
            await channel.show_owner_commands(inbound.sender.user_id)
        return True

    async def _pairing_notice(self, sender: Sender, notice: str, code: str) -> None:
        """A new pairing request goes to the owner's DM; with no owner to reach, to the
        terminal, where it cannot be missed among log lines."""
        if self._owner_reachable():
            await self.notify_owner(sender.platform, notice)
            return
        handle = f" @{sender.username}" if sender.username else ""
        self.announce(
            [
                f"PAIRING REQUEST from {printable(sender.display_name + handle)} "
                f"({printable(sender.key)}), and no owner to approve it in chat.",
                f"    let them in:  companion pairing approve {code}",
                f"    refuse:       companion pairing deny {code}",
                "Is it you? Claim the bot instead with the /claim code printed at start-up.",
            ]
        )

    def _owner_reachable(self) -> bool:
        return any(key.partition(":")[0] in self.channels for key in self.access.is_owner.keys)

    async def _bound_partners(self, chat: ChatRef) -> list[Partner]:
        rows = await self.store.bindings(chat.platform, chat.chat_id)
        partners = [await self.catalog.find(row["partner_id"]) for row in rows]
        return [p for p in partners if p is not None]

    async def _converse(
        self, inbound: Inbound, is_owner: bool, bound: list[Partner], row: ChatRow | None
    ) -> None:
        """Store a message that is part of a conversation and queue it for a turn; ``row`` is
        its chat as stored, if the caller read it already."""
        chat = inbound.chat
        row = row or await self.store.chat(chat.key)
        assert row is not None
        if chat.is_dm and await self._partner_gone(inbound, row):
            return
        if chat.is_dm:
            partner_id = await self._dm_partner(row, is_owner)
            if partner_id is False:
                await self._ask_for_partner(inbound)
                return
            addressed = True
        else:
            partner_id = self._group_partner(inbound, bound)
            # with mention gating off, a bound partner answers everything said in the group
            addressed = inbound.addressed or not self.config.access.mention_gating
        if inbound.media is not None:
            within = await self._media_within_limits(inbound, addressed)
            if within is None:
                return
            inbound = within
        speaker = Speaker(inbound.sender.key, inbound.sender.display_name, is_owner)
        key = queue_key(chat.key, partner_id if isinstance(partner_id, str) else None)
        media = inbound.media
        message = NewMessage(
            chat_key=chat.key,
            role="user" if addressed else "context",
            text=inbound.text,
            audience=audience_for(row, speaker),
            status="pending" if addressed else "done",
            dedup_key=f"{chat.platform}:{chat.chat_id}:{inbound.message_id}",
            queue_key=key if addressed else None,
            partner_id=partner_id if isinstance(partner_id, str) else None,
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
        if await store(message) is None:
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

    async def _partner_gone(self, inbound: Inbound, chat: ChatRow) -> bool:
        """The partner this DM chose no longer exists (deleted, on whichever worker): the
        message is not passed on to someone else; the user is told, once (the choice is
        cleared, so their next message goes where a new chat's would), and asked to choose.
        True if so."""
        selected = chat.selected_partner
        if not selected or await self.catalog.find(selected) is not None:
            return False
        broken = selected in self.catalog.errors
        if not broken:
            await self.store.select_partner(chat.chat_key, None)
        logger.info(
            "chat %s: its partner %s is not there; the user was told", chat.chat_key, selected
        )
        choices = tuple(Choice(p.name, f"/partner {p.id}") for p in self.catalog.public())
        text = (PARTNER_UNAVAILABLE if broken else PARTNER_GONE).format(partner=selected)
        if not choices:
            text += " There is no other partner to talk with yet."
        await self.reply(inbound.chat, text, inbound.message_id, choices)
        return True

    async def _dm_partner(self, chat: ChatRow, is_owner: bool) -> str | None | bool:
        """The partner of a DM; None is the owner's assistant; False means "ask the user"."""
        selected = chat.selected_partner
        if selected and await self.catalog.find(selected):
            return selected
        if is_owner:
            return None
        default = self.default_partner()
        if default is None:
            return False
        return default.id

    def default_partner(self) -> Partner | None:
        wanted = self.config.partners.default
        if wanted and (partner := self.catalog.get(wanted)):
            return partner
        public = self.catalog.public()
        return public[0] if len(public) == 1 else None

    def _group_partner(self, inbound: Inbound, bound: list[Partner]) -> str:
        if inbound.partner_hint and any(p.id == inbound.partner_hint for p in bound):
            return inbound.partner_hint
        text = inbound.text.casefold()
        for partner in bound:
            if partner.name.casefold() in text:
                return partner.id
        return bound[0].id

    async def _ask_for_partner(self, inbound: Inbound) -> None:
        choices = tuple(Choice(p.name, f"/partner {p.id}") for p in self.catalog.public())
        text = "Who would you like to talk with? Pick a partner, then write again."
        if not choices:
            text = "There is no partner to talk with yet. The owner needs to create one."
        await self.reply(inbound.chat, text, inbound.message_id, choices)

    async def _command(self, inbound: Inbound, name: str, args: list[str], is_owner: bool):
        # a command may name a partner another worker made or changed a moment ago
        await self.catalog.refresh()
        ctx = CommandContext(
            config=self.config,
            store=self.store,
            catalog=self.catalog,
            access=self.access,
            inbound=inbound,
            chat_key=inbound.chat.key,
            is_owner=is_owner,
            args=args,
            end_sessions=self.sessions.end_chat,
            notify_user=self.notify_user,
            notify_owner=self.notify_owner,
            bot_can_read_groups=self.can_read_groups.get(inbound.chat.platform),
            partner=await self._current_partner(inbound.chat, is_owner),
            user_memory=self.user_memory,
            admin=self.admin if is_owner else None,
            download=self._file_download(inbound.chat.platform) if is_owner else None,
        )
        try:
            reply = await run_command(ctx, name)
        except StoreUnavailable:
            raise  # NotStored (see storing()): the platform offers the command again
        except Exception as exc:
            # the edge of one command: whatever broke, the sender gets an answer
            logger.exception("/%s from %s failed", name, inbound.sender.key)
            reply = await self._command_failed(inbound, name, exc, is_owner)
        if reply.attachment is not None:
            await self._send_file(inbound.chat, reply.attachment, reply.text)
            return
        if reply.photo is None or not await self._photo(inbound, reply, reply.photo):
            await self.reply(inbound.chat, reply.text, inbound.message_id, reply.choices)
        if reply.greet is not None:
            await self._greet(inbound, reply.greet, is_owner)

    def _file_download(self, platform: str) -> Callable[[str], Awaitable[bytes]] | None:
        """How an owner command fetches the document sent with it: through its channel, and
        only now. Channels hand files in by reference, so a file whose sender is not served
        (or not the owner) is never downloaded, whatever its caption says."""
        channel = self.channels.get(platform)
        return channel.download if isinstance(channel, FileSource) else None

    async def _photo(self, inbound: Inbound, reply: CommandReply, photo: bytes) -> bool:
        """The answer as a picture's caption, where the channel shows pictures and the text
        fits; False if it was not sent that way (the caller sends the text)."""
        channel = self.channels.get(inbound.chat.platform)
        fits = len(reply.text.encode("utf-16-le")) // 2 <= getattr(channel, "caption_limit", 0)
        if not isinstance(channel, PhotoChannel) or not fits:
            return False
        outbound = Outbound(inbound.chat, reply.text, inbound.message_id, choices=reply.choices)
        try:
            await channel.send_photo(outbound, photo)
        except DeliveryError as exc:
            logger.warning(
                "picture to %s not delivered (%s); sending the text", inbound.chat.key, exc
            )
            return False
        return True

    async def _greet(self, inbound: Inbound, partner_id: str, is_owner: bool) -> None:
        partner = self.catalog.get(partner_id)
        if self.greeter is None or partner is None:
            return
        sender = inbound.sender
        speaker = Speaker(sender.key, sender.display_name, is_owner)
        await self.greeter.greet(inbound.chat.key, partner, speaker)

    async def _command_failed(
        self, inbound: Inbound, name: str, exc: Exception, is_owner: bool
    ) -> CommandReply:
        """Every command answers: a failure is audited, the owner is told, the sender gets a
        short apology (the stored data stays as it was; nothing is retried behind their back)."""
        problem = type(exc).__name__
        await self.store.audit(
            inbound.sender.key, "command_failed", command=name, error=f"{problem}: {exc}"
        )
        if not is_owner:
            await self.notify_owner(
                inbound.chat.platform,
                f"/{literal_line(name)} from {literal_line(inbound.sender.key)} failed "
                f"({problem}: {literal_line(str(exc))}). The log has the details.",
            )
        told = "The log has the details." if is_owner else "The owner has been told."
        return CommandReply(
            f"Sorry, /{name} didn't work because of a problem on my side ({problem}). {told}"
        )

    async def _current_partner(self, chat: ChatRef, is_owner: bool) -> Partner | None:
        """Who this DM talks with (selected, else the default); None in groups."""
        row = await self.store.chat(chat.key) if chat.is_dm else None
        if row is None:
            return None
        partner_id = await self._dm_partner(row, is_owner)
        return self.catalog.get(partner_id) if isinstance(partner_id, str) else None

    async def _send_file(self, chat: ChatRef, attachment: tuple[str, bytes], caption: str) -> None:
        channel = self.channels.get(chat.platform)
        if channel is None:
            return
        try:
            await channel.send_file(chat, attachment[0], attachment[1], caption)
        except DeliveryError as exc:
            logger.warning("file to %s not delivered: %s", chat.key, exc)
            await self.reply(chat, f"I couldn't send the file ({exc}). Please try again later.")

    # ---- direct sends (command answers, notices) -------------------------------------

    async def reply(
        self, chat: ChatRef, text: str, reply_to: str | None = None, choices: tuple = ()
    ) -> None:
        await self.notices.reply(chat, text, reply_to, choices)

    async def announce_approvals(self) -> None:
        """Tell each user approved elsewhere (the terminal) that they are in, exactly once."""
        for request in await self.store.unannounced_approvals():
            if await self.store.take_announcement(request["code"]):
                await self.notify_user(request["user_key"], APPROVED_WELCOME)

    async def notify_user(self, user_key: str, text: str) -> None:
        await self.notices.notify_user(user_key, text)

    async def notify_owner(self, platform: str, text: str) -> None:
        await self.notices.notify_owner(platform, text)
