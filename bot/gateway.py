"""The gateway's front door: every channel hands each inbound message to :meth:`receive`.

receive -> who is it (user and chat rows kept current) -> access (owner, DM policy, bound
groups) -> command, or: which partner -> persisted (deduplicated by platform message id) ->
the dispatcher's queue for that chat and partner. Group messages that do not address a
partner are stored as context for the next answered turn, never answered.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import replace

from adapters.base import Channel, DeliveryError, NotStored
from bot.access import Access
from bot.admin_services import AdminServices
from bot.commands import CommandContext, CommandReply, parse_command, run_command
from bot.config import Config
from bot.dispatcher import Dispatcher
from bot.events import ChatRef, Choice, Inbound, Outbound
from bot.literal import literal_line
from bot.sessions import Sessions, Speaker, audience_for
from bot.store import ChatRow, NewMessage, Store
from bot.turns import queue_key
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from partners.user_memory import UserMemory

logger = logging.getLogger(__name__)

MAX_INBOUND_CHARS = 16_000
CUT_NOTE = "\n[message cut: it was longer than {limit} characters]"


@contextlib.contextmanager
def storing() -> Iterator[None]:
    """The database refusing a write or read (a full disk, an I/O error) as NotStored."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        raise NotStored(f"the database cannot store it ({exc})") from exc


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
        stop_turn: Callable[[str], bool],
    ) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.access = access
        self.dispatcher = dispatcher
        self.channels = channels
        self.sessions = sessions
        self.user_memory = user_memory
        self._stop_turn = stop_turn
        self.bot_usernames: dict[str, str] = {}
        self.can_read_groups: dict[str, bool] = {}
        self.admin: AdminServices | None = None
        """Set by build_app: what the owner's /admin commands reach."""

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

    def partner_choices(self) -> list[tuple[str, str]]:
        return [(p.id, p.name) for p in self.catalog.public()]

    async def receive(self, inbound: Inbound) -> None:
        """Handle one inbound message. Safe to call twice with the same message.

        Raises NotStored when the database cannot take it (a full disk, an I/O error): the
        channel leaves the message with the platform, to be offered again once it can."""
        with storing():
            await self._receive(inbound)

    async def _receive(self, inbound: Inbound) -> None:
        sender, chat = inbound.sender, inbound.chat
        if len(inbound.text) > MAX_INBOUND_CHARS:
            inbound = replace(
                inbound,
                text=inbound.text[:MAX_INBOUND_CHARS] + CUT_NOTE.format(limit=MAX_INBOUND_CHARS),
            )
        await self.store.upsert_user(
            sender.key, sender.platform, sender.user_id, sender.display_name, sender.username
        )
        await self.store.upsert_chat(
            chat.key, chat.platform, chat.chat_id, chat.thread_id, chat.kind, chat.title
        )
        is_owner = self.access.is_owner(sender.key)
        bound = [] if chat.is_dm else await self._bound_partners(chat)
        command = parse_command(inbound.text, self.bot_usernames.get(chat.platform))
        if chat.is_dm:
            verdict = await self.access.check_dm(sender)
            if not verdict.allowed:
                if verdict.owner_notice:
                    await self.notify_owner(chat.platform, verdict.owner_notice)
                if verdict.reply:
                    await self.reply(chat, verdict.reply, inbound.message_id)
                return
        else:
            ignored = not bound and not (is_owner and command)
            if ignored or (not is_owner and await self.access.is_blocked(sender)):
                return
        if command is not None and (chat.is_dm or inbound.addressed or is_owner):
            await self._command(inbound, command[0], command[1], is_owner)
            return
        await self._converse(inbound, is_owner, bound)

    async def _bound_partners(self, chat: ChatRef) -> list[Partner]:
        rows = await self.store.bindings(chat.platform, chat.chat_id)
        partners = [self.catalog.get(row["partner_id"]) for row in rows]
        return [p for p in partners if p is not None]

    async def _converse(self, inbound: Inbound, is_owner: bool, bound: list[Partner]) -> None:
        chat = inbound.chat
        row = await self.store.chat(chat.key)
        assert row is not None
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
        speaker = Speaker(inbound.sender.key, inbound.sender.display_name, is_owner)
        key = queue_key(chat.key, partner_id if isinstance(partner_id, str) else None)
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
        )
        if await self.store.add_message(message) is None:
            logger.info("duplicate message %s in %s ignored", inbound.message_id, chat.key)
            return
        if addressed:
            self.dispatcher.notify(key)

    async def _dm_partner(self, chat: ChatRow, is_owner: bool) -> str | None | bool:
        """The partner of a DM; None is the owner's assistant; False means "ask the user"."""
        selected = chat.selected_partner
        if selected and self.catalog.get(selected):
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
        )
        try:
            reply = await run_command(ctx, name)
        except sqlite3.OperationalError:
            raise  # NotStored (see storing()): the platform offers the command again
        except Exception as exc:
            # the edge of one command: whatever broke, the sender gets an answer
            logger.exception("/%s from %s failed", name, inbound.sender.key)
            reply = await self._command_failed(inbound, name, exc, is_owner)
        if reply.attachment is not None:
            await self._send_file(inbound.chat, reply.attachment, reply.text)
            return
        await self.reply(inbound.chat, reply.text, inbound.message_id, reply.choices)

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
        channel = self.channels.get(chat.platform)
        if channel is None:
            return
        chunks = channel.split(text)
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            outbound = Outbound(
                chat, chunk, reply_to if index == 0 else None, choices=choices if last else ()
            )
            try:
                await channel.send(outbound)
            except DeliveryError as exc:
                logger.warning("notice to %s not delivered: %s", chat.key, exc)
                return

    async def notify_user(self, user_key: str, text: str) -> None:
        platform, _, user_id = user_key.partition(":")
        await self.reply(ChatRef(platform, user_id, "dm"), text)

    async def notify_owner(self, platform: str, text: str) -> None:
        """Tell the owner in a DM: on this platform if they have an id there, else on the
        first connected platform where they do."""
        keys = sorted(self.access.is_owner.keys, key=lambda k: not k.startswith(f"{platform}:"))
        for key in keys:
            if key.partition(":")[0] in self.channels:
                await self.notify_user(key, text)
                return
        logger.warning("owner notice not delivered (no owner id configured): %s", text)
