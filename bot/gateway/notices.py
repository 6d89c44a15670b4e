"""The gateway's own sends: command answers and notices to a user or to the owner, straight
through the channel (no turn, no delivery record: nothing is retried). A notice the platform
refuses is logged and dropped."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from adapters.base import Channel, DeliveryError
from bot.cli.terminal import printable
from bot.events import ChatRef, Choice, Outbound, Sender
from bot.gateway.access import APPROVED_WELCOME, Access
from bot.store import Store

logger = logging.getLogger(__name__)

Announce = Callable[[list[str]], None]


class Notices:
    def __init__(
        self, channels: Mapping[str, Channel], access: Access, store: Store, announce: Announce
    ) -> None:
        self.channels = channels
        self.access = access
        self.store = store
        self.announce = announce
        """Shows lines on the terminal that runs the gateway (pairing with no owner)."""

    async def reply(
        self,
        chat: ChatRef,
        text: str,
        reply_to: str | None = None,
        choices: tuple[Choice, ...] = (),
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

    async def announce_approvals(self) -> None:
        """Tell each user approved elsewhere (the terminal) that they are in, exactly once."""
        for request in await self.store.unannounced_approvals():
            if await self.store.take_announcement(request["code"]):
                await self.notify_user(request["user_key"], APPROVED_WELCOME)

    async def pairing_request(self, sender: Sender, notice: str, code: str) -> None:
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
