"""Users and access: people on each platform with their access, voice mode and time zone;
pairing requests of strangers; owner claims made with a one-time code; the web page's list of
users.

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.users.Users`."""

from __future__ import annotations

from typing import Any, Protocol

from bot.store.admin_rows import ClaimedOwnerRow, PairingRow, UserRow


class UsersStore(Protocol):
    """Who may talk to the partners, and how the owner came to be the owner."""

    async def upsert_user(
        self, user_key: str, platform: str, platform_user_id: str, name: str, username: str | None
    ) -> None: ...

    async def user(self, user_key: str) -> UserRow | None: ...

    async def set_user_access(self, user_key: str, access: str) -> bool: ...

    async def voice_mode(self, user_key: str) -> str | None: ...

    async def set_voice_mode(self, user_key: str, mode: str) -> None: ...

    async def set_user_timezone(self, user_key: str, timezone: str) -> None: ...

    async def create_pairing(self, code: str, user_key: str, ttl_seconds: float) -> None: ...

    async def live_pairings(self, user_key: str | None = None) -> list[PairingRow]: ...

    async def pairing(self, code: str) -> PairingRow | None: ...

    async def close_pairing(self, code: str, status: str) -> None: ...

    async def unannounced_approvals(self) -> list[PairingRow]:
        """Pairing requests approved (from the terminal) whose user has not been told yet."""

    async def take_announcement(self, code: str) -> bool:
        """Claim the telling of an approval: True for exactly one caller."""

    async def add_claim_code(self, code_hash: str, platform: str, ttl_seconds: float) -> None: ...

    async def live_claim_codes(self, platform: str) -> list[str]:
        """Hashes of the codes that may still claim ``platform`` (unused, unexpired)."""

    async def redeem_claim(self, code_hash: str, platform: str, user_key: str) -> bool:
        """Make ``user_key`` the owner of ``platform`` with a live code, in one transaction:
        False if the code is no longer live or the platform has been claimed meanwhile. Every
        other code for the platform is used up with it."""

    async def claimed_owners(self) -> list[ClaimedOwnerRow]: ...

    async def live_pairing_count(self) -> int:
        """How many pairing requests are waiting (pending, unexpired)."""

    async def web_pairings(self, limit: int) -> list[dict[str, Any]]:
        """The oldest ``limit`` waiting pairing requests, each with its user's display name
        (``None`` for a user not recorded)."""

    async def user_count(self) -> int:
        """How many users the gateway has seen."""

    async def web_users(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """A page of the users the gateway has seen, newest first (``limit`` from ``offset``),
        each with its check-in settings."""
