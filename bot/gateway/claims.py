"""Claiming ownership: the first person to send a one-time code becomes the owner.

With no owner for a platform (no id in ``[owner]``, nobody claimed it yet) ``companion run`` and
``companion setup`` print a claim code. Sent in a direct message as ``/claim CODE`` — or as
``/start CODE``, what Telegram sends for the deep link ``t.me/<bot>?start=CODE`` — it makes the
sender that platform's owner: recorded in the store (config.toml may be read-only in a
container), audited, and known to the owner check at once. Ids in config.toml stay owners too.

A code lasts :data:`CLAIM_TTL_SECONDS`, works once, and is kept only as a hash. A guess is
compared with every live code in constant time, and the answer to a wrong one is the same
whatever was sent.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from bot.events import Sender
from bot.gateway.access import CODE_ALPHABET, OwnerCheck
from bot.store import Store

CLAIM_TTL_SECONDS = 3600
CLAIM_CODE_LENGTH = 10
"""32 symbols ** 10 = 2 ** 50 codes: not guessable within an hour at any rate a chat allows."""
CLAIM_COMMANDS = ("claim", "start")

CLAIMED = (
    "You're the owner of this companion on {platform} now. Send /admin for your commands "
    "and /help for the rest."
)
CLAIM_REFUSED = (
    "That claim code is not valid: it may be mistyped, used already, or older than an hour. "
    "`companion run` prints a fresh one each time it starts (and so does `companion setup`)."
)


def code_hash(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


class OwnerClaims:
    """Issues claim codes and turns the right one, sent in a DM, into an owner."""

    def __init__(self, store: Store, is_owner: OwnerCheck) -> None:
        self.store = store
        self.is_owner = is_owner

    def unclaimed(self, platform: str) -> bool:
        return not self.is_owner.has_owner(platform)

    async def issue(self, platform: str, ttl_seconds: float = CLAIM_TTL_SECONDS) -> str:
        """A fresh code for ``platform``; earlier live ones stay valid until they expire."""
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CLAIM_CODE_LENGTH))
        await self.store.add_claim_code(code_hash(code), platform, ttl_seconds)
        return code

    async def redeem(self, sender: Sender, code: str) -> bool:
        """Make ``sender`` the owner of their platform if ``code`` is live; audited."""
        given = code_hash(code)
        match = None
        for stored in await self.store.live_claim_codes(sender.platform):
            if hmac.compare_digest(stored, given):
                match = stored
        claimed = match is not None and await self.store.redeem_claim(
            match, sender.platform, sender.key
        )
        await self.store.audit(
            sender.key,
            "owner claim",
            platform=sender.platform,
            outcome="claimed" if claimed else "refused",
        )
        if claimed:
            self.is_owner.add(sender.key)
        return claimed


def claim_notice(platform: str, code: str, bot_username: str | None) -> list[str]:
    """What the terminal shows so the owner can claim ``platform``."""
    lines = [f"CLAIM YOUR BOT: nobody owns it on {platform} yet."]
    if platform == "telegram" and bot_username:
        lines.append(f"Open https://t.me/{bot_username}?start={code} and press Start,")
        lines.append("or send the bot this in a direct message:")
    else:
        lines.append("Send the bot this in a direct message:")
    lines += [
        f"    /claim {code}",
        "The first person to do so becomes the owner. The code works once, for 1 hour;",
        "the owner is kept in the database (set owner ids in config.toml to skip this).",
    ]
    return lines
