"""Running one command a message is: its context built, its answer sent (a file, a picture
with a caption, text with buttons), a greeting after a partner is chosen. Every command
answers: a failure is logged, audited and told. ``bot/commands/table.py`` declares the
commands, ``bot/commands/handlers.py`` dispatches them (:func:`run_command`, the one path every
command takes, from any channel)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from adapters.base import Channel, DeliveryError, FileSource, PhotoChannel
from bot.admin.services import AdminServices
from bot.commands.handlers import run_command
from bot.commands.types import CommandContext, CommandReply
from bot.config.model import Config
from bot.delivery.greeter import Greeter
from bot.delivery.notices import Notices
from bot.events import ChatRef, Inbound, Outbound
from bot.gateway.access import Access
from bot.gateway.partner_choice import PartnerChoice
from bot.store import Store, StoreUnavailable
from bot.text.literal import literal_line
from bot.turn.sessions import Sessions, Speaker
from partners.catalog import PartnerCatalog
from partners.user_memory import UserMemory

logger = logging.getLogger(__name__)


class CommandRuns:
    def __init__(
        self,
        config: Config,
        store: Store,
        catalog: PartnerCatalog,
        access: Access,
        sessions: Sessions,
        user_memory: UserMemory,
        channels: Mapping[str, Channel],
        notices: Notices,
        partners: PartnerChoice,
        greeter: Greeter | None,
    ) -> None:
        self.config = config
        self.store = store
        self.catalog = catalog
        self.access = access
        self.sessions = sessions
        self.user_memory = user_memory
        self.channels = channels
        self.notices = notices
        self.partners = partners
        self.greeter = greeter

    async def run(
        self,
        inbound: Inbound,
        name: str,
        args: list[str],
        is_owner: bool,
        admin: AdminServices | None,
        can_read_groups: bool | None,
    ) -> None:
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
            notify_user=self.notices.notify_user,
            notify_owner=self.notices.notify_owner,
            bot_can_read_groups=can_read_groups,
            partner=await self.partners.current(inbound.chat, is_owner),
            user_memory=self.user_memory,
            admin=admin,
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
            await self.notices.reply(inbound.chat, reply.text, inbound.message_id, reply.choices)
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
            await self.notices.notify_owner(
                inbound.chat.platform,
                f"/{literal_line(name)} from {literal_line(inbound.sender.key)} failed "
                f"({problem}: {literal_line(str(exc))}). The log has the details.",
            )
        told = "The log has the details." if is_owner else "The owner has been told."
        return CommandReply(
            f"Sorry, /{name} didn't work because of a problem on my side ({problem}). {told}"
        )

    async def _send_file(self, chat: ChatRef, attachment: tuple[str, bytes], caption: str) -> None:
        channel = self.channels.get(chat.platform)
        if channel is None:
            return
        try:
            await channel.send_file(chat, attachment[0], attachment[1], caption)
        except DeliveryError as exc:
            logger.warning("file to %s not delivered: %s", chat.key, exc)
            await self.notices.reply(
                chat, f"I couldn't send the file ({exc}). Please try again later."
            )
