"""Pairing's notices, the gateway's side of them: a new pairing request told to the owner (or,
with no owner to reach, shown on the terminal), and a welcome to each user approved elsewhere
(the terminal), exactly once. Every send goes through the owner-notices part built first
(``bot/delivery/notices.py``), handed in: this adds only who is told what, and when."""

from __future__ import annotations

from collections.abc import Callable

from bot.cli.terminal import printable
from bot.delivery.notices import Notices
from bot.events import Sender
from bot.gateway.access import APPROVED_WELCOME
from bot.store import Store

Announce = Callable[[list[str]], None]
"""Shows lines on the terminal that runs the gateway."""


class PairingNotices:
    def __init__(self, notices: Notices, store: Store, announce: Announce) -> None:
        self.notices = notices
        self.store = store
        self.announce = announce

    async def announce_approvals(self) -> None:
        """Tell each user approved elsewhere (the terminal) that they are in, exactly once."""
        for request in await self.store.unannounced_approvals():
            if await self.store.take_announcement(request["code"]):
                await self.notices.notify_user(request["user_key"], APPROVED_WELCOME)

    async def pairing_request(self, sender: Sender, notice: str, code: str) -> None:
        """A new pairing request goes to the owner's DM; with no owner to reach, to the
        terminal, where it cannot be missed among log lines."""
        if self._owner_reachable():
            await self.notices.notify_owner(sender.platform, notice)
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
        channels, owners = self.notices.channels, self.notices.is_owner.keys
        return any(key.partition(":")[0] in channels for key in owners)
