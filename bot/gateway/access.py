"""Who may talk to a partner: the owner, allowed users, paired users, bound groups.

Owner ids from the config always pass. In DMs, ``access.dm_policy`` decides the rest:
``open`` lets anyone in, ``allowlist`` only users in ``access.allow`` or approved by the owner,
and ``pairing`` (the default) gives an unknown user a short code that the owner approves with
``/admin approve CODE``; codes expire after an hour, and a user who writes again gets the same
live code. Blocked and unknown users never reach the model. Groups answer only where a partner
is bound.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from bot.config.model import Config
from bot.events import Sender
from bot.store import Store, UserRow
from bot.text.literal import literal_line

PAIRING_TTL_SECONDS = 3600
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
CONSOLE_OWNER = "console:console"
APPROVED_WELCOME = "You're in! The owner approved you. Say hello."


def owner_keys(config: Config) -> set[str]:
    keys = {CONSOLE_OWNER}
    keys.update(f"telegram:{i}" for i in config.owner.telegram_ids)
    keys.update(f"discord:{i}" for i in config.owner.discord_ids)
    return keys


class OwnerCheck:
    """Whether a user key is the owner's: config ids, claimed owners, and the console user.
    One instance is shared by every part, so an owner who claims the bot counts at once."""

    def __init__(self, keys: set[str]) -> None:
        self.keys = keys

    def __call__(self, user_key: str) -> bool:
        return user_key in self.keys

    def add(self, user_key: str) -> None:
        self.keys.add(user_key)

    def has_owner(self, platform: str) -> bool:
        return any(key.partition(":")[0] == platform for key in self.keys)


@dataclass(frozen=True)
class DMVerdict:
    allowed: bool
    reply: str | None = None
    """What to tell the sender when not allowed (None: say nothing)."""
    owner_notice: str | None = None
    """What to tell the owner (a new pairing request)."""
    code: str | None = None


class Access:
    def __init__(self, config: Config, store: Store, is_owner: OwnerCheck) -> None:
        self.config = config
        self.store = store
        self.is_owner = is_owner
        self._allowed = set(config.access.allow)

    def _config_allows(self, sender: Sender) -> bool:
        return sender.key in self._allowed or sender.user_id in self._allowed

    async def is_blocked(self, sender: Sender) -> bool:
        user = await self.store.user(sender.key)
        return user is not None and user["access"] == "blocked"

    async def check_dm(self, sender: Sender, user: UserRow | None) -> DMVerdict:
        """Whether a DM from ``sender`` may reach a partner; ``user`` is the sender as
        stored (read by the caller with the chat: one round trip for both)."""
        if self.is_owner(sender.key):
            return DMVerdict(True)
        status = user["access"] if user else "unknown"
        if status == "blocked":
            return DMVerdict(False)
        policy = self.config.access.dm_policy
        if policy == "open" or status == "allowed" or self._config_allows(sender):
            return DMVerdict(True)
        if policy == "allowlist":
            return DMVerdict(False, "Sorry, this bot is private. Ask its owner to add you.")
        return await self._pairing(sender)

    async def _pairing(self, sender: Sender) -> DMVerdict:
        live = await self.store.live_pairings(sender.key)
        if live:
            code = live[-1]["code"]
            return DMVerdict(False, pairing_reply(code), code=code)
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        await self.store.create_pairing(code, sender.key, PAIRING_TTL_SECONDS)
        handle = f" @{literal_line(sender.username)}" if sender.username else ""
        notice = (
            f"New pairing request from {literal_line(sender.display_name)}{handle} "
            f"(id {literal_line(sender.user_id)} on "
            f"{sender.platform}). Approve with /admin approve {code} or refuse with "
            f"/admin deny {code}. The code expires in 1 hour."
        )
        return DMVerdict(False, pairing_reply(code), notice, code)

    async def approve(self, code: str) -> str:
        request = await self.store.pairing(code.upper())
        if request is None:
            raise AccessError(f"no pairing code {code!r}; /admin pending lists the open ones")
        if request["status"] != "pending":
            raise AccessError(f"code {code} was already {request['status']}")
        if request["expires_at"] <= time.time():
            await self.store.close_pairing(request["code"], "expired")
            raise AccessError(f"code {code} has expired; ask the user to write again")
        await self.store.close_pairing(request["code"], "approved")
        await self.store.set_user_access(request["user_key"], "allowed")
        return str(request["user_key"])

    async def deny(self, code: str) -> str:
        request = await self.store.pairing(code.upper())
        if request is None or request["status"] != "pending":
            raise AccessError(f"no open pairing code {code!r}; /admin pending lists them")
        await self.store.close_pairing(request["code"], "denied")
        return str(request["user_key"])


class AccessError(ValueError):
    """An access command could not be carried out; the message says why."""


def pairing_reply(code: str) -> str:
    return (
        f"Hi! This companion is private. I've asked its owner to let you in — your code is "
        f"{code}. You'll be able to chat as soon as they approve it."
    )
