"""What each channel must know of the gateway's state, pushed to it rather than asked for per
message: the owners (a command menu), the chats with a partner bound (missed messages are
fetched there), the chats with several (a reply there says who speaks), the partners anyone
may pick. A :class:`~bot.events.ChannelView` goes to every channel that takes one
(:class:`~adapters.base.ViewChannel`) before it starts, and again when it changed: after a
command or a claim (what changes bindings and owners here), and when a group's bindings, read
for a message anyway, disagree with the view (bound meanwhile by another worker, the command
line, or the web page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from adapters.base import Channel, ViewChannel
from bot.events import ChannelView, ChatRef
from bot.gateway.access import OwnerCheck
from bot.store import Store
from partners.catalog import PartnerCatalog
from partners.persona import Partner


class ChannelViews:
    def __init__(
        self,
        channels: Mapping[str, Channel],
        store: Store,
        catalog: PartnerCatalog,
        is_owner: OwnerCheck,
    ) -> None:
        self.channels = channels
        self.store = store
        self.catalog = catalog
        self.is_owner = is_owner
        self.shown: dict[str, ChannelView] = {}
        """The view each channel holds, by platform."""

    async def publish(self) -> None:
        """Push a fresh view to every channel whose view changed (or that has none yet)."""
        for platform, channel in self.channels.items():
            if not isinstance(channel, ViewChannel):
                continue
            view = await self.view(platform)
            if self.shown.get(platform) != view:
                self.shown[platform] = view
                channel.set_view(view)

    async def view(self, platform: str) -> ChannelView:
        keys = (key.partition(":") for key in sorted(self.is_owner.keys))
        owners = tuple(user_id for where, _, user_id in keys if where == platform)
        bound: dict[str, int] = {}
        for row in await self.store.bindings(platform):
            if self.catalog.get(row["partner_id"]) is not None:
                bound[row["chat_id"]] = bound.get(row["chat_id"], 0) + 1
        return ChannelView(
            owners=owners,
            bound_chats=tuple(bound),
            shared_chats=frozenset(chat for chat, count in bound.items() if count > 1),
            partners=tuple((p.id, p.name) for p in self.catalog.public()),
        )

    async def check_group(self, chat: ChatRef, bound: Sequence[Partner]) -> None:
        """A group's partners as just read for a message: if the channel's view says
        otherwise, it gets a fresh one (before the reply goes out)."""
        view = self.shown.get(chat.platform)
        if view is None:
            return
        bound_here = chat.chat_id in view.bound_chats
        shared_here = chat.chat_id in view.shared_chats
        if bound_here != bool(bound) or shared_here != (len(bound) > 1):
            await self.publish()
