"""Users (a person on one platform), pairing requests and owner claims. One query text for
both backends."""

from __future__ import annotations

import time
from typing import Any, cast

from bot.store.admin_rows import ClaimedOwnerRow, PairingRow, UserRow
from bot.store.base import StoreBase

USER_BY_KEY = "SELECT * FROM users WHERE user_key = ?"


class _ClaimLost(Exception):
    """The code was no longer live: roll the claim back."""


class Users(StoreBase):
    """Users, pairing requests and owner claims."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # what upsert_user last wrote, so an unchanged name costs no write
        self._written_users: dict[str, tuple[str, str | None]] = {}

    async def upsert_user(
        self, user_key: str, platform: str, platform_user_id: str, name: str, username: str | None
    ) -> None:
        if self._written_users.get(user_key) == (name, username):
            return
        now = time.time()
        await self._write(
            "INSERT INTO users AS u (user_key, platform, platform_user_id, display_name,"
            " username, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)"
            " ON CONFLICT (user_key) DO UPDATE SET display_name = excluded.display_name,"
            " username = excluded.username, updated_at = excluded.updated_at"
            # null-safe "differs" both read (SQLite has IS DISTINCT FROM only since 3.39);
            # a display name is never null
            " WHERE u.display_name != excluded.display_name"
            " OR ((u.username = excluded.username) IS NOT TRUE"
            " AND (u.username IS NOT NULL OR excluded.username IS NOT NULL))",
            user_key, platform, platform_user_id, name, username, now,
        )  # fmt: skip
        self._written_users[user_key] = (name, username)

    async def user(self, user_key: str) -> UserRow | None:
        row = await self._one("SELECT * FROM users WHERE user_key = ?1", user_key)
        return cast(UserRow, dict(row)) if row else None

    async def set_user_access(self, user_key: str, access: str) -> bool:
        changed = await self._write(
            "UPDATE users SET access = ?1, updated_at = ?2 WHERE user_key = ?3",
            access,
            time.time(),
            user_key,
        )
        return changed > 0

    async def voice_mode(self, user_key: str) -> str | None:
        row = await self._one("SELECT voice_mode FROM users WHERE user_key = ?1", user_key)
        return row[0] if row else None

    async def set_voice_mode(self, user_key: str, mode: str) -> None:
        await self._write(
            "UPDATE users SET voice_mode = ?1, updated_at = ?2 WHERE user_key = ?3",
            mode,
            time.time(),
            user_key,
        )

    async def set_user_timezone(self, user_key: str, timezone: str) -> None:
        await self._write(
            "UPDATE users SET timezone = ?1, updated_at = ?2 WHERE user_key = ?3",
            timezone,
            time.time(),
            user_key,
        )

    async def create_pairing(self, code: str, user_key: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO pairing_requests (code, user_key, created_at, expires_at)"
            " VALUES (?1, ?2, ?3, ?4)",
            code,
            user_key,
            now,
            now + ttl_seconds,
        )

    async def live_pairings(self, user_key: str | None = None) -> list[PairingRow]:
        rows = await self._all(
            "SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > ?1"
            " AND user_key = coalesce(?2, user_key) ORDER BY created_at",
            time.time(),
            user_key,
        )
        return [cast(PairingRow, dict(row)) for row in rows]

    async def pairing(self, code: str) -> PairingRow | None:
        row = await self._one("SELECT * FROM pairing_requests WHERE code = ?1", code)
        return cast(PairingRow, dict(row)) if row else None

    async def close_pairing(self, code: str, status: str) -> None:
        await self._write("UPDATE pairing_requests SET status = ?1 WHERE code = ?2", status, code)

    async def unannounced_approvals(self) -> list[PairingRow]:
        """Pairing requests approved (from the terminal) whose user has not been told yet."""
        rows = await self._all(
            "SELECT * FROM pairing_requests WHERE status = 'approved' AND announced_at IS NULL"
            " ORDER BY created_at"
        )
        return [cast(PairingRow, dict(row)) for row in rows]

    async def take_announcement(self, code: str) -> bool:
        """Claim the telling of an approval: True for exactly one caller."""
        changed = await self._write(
            "UPDATE pairing_requests SET announced_at = ?1 WHERE code = ?2"
            " AND status = 'approved' AND announced_at IS NULL",
            time.time(),
            code,
        )
        return changed == 1

    async def add_claim_code(self, code_hash: str, platform: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._write(
            "INSERT INTO claim_codes (code_hash, platform, created_at, expires_at)"
            " VALUES (?1, ?2, ?3, ?4)",
            code_hash,
            platform,
            now,
            now + ttl_seconds,
        )

    async def live_claim_codes(self, platform: str) -> list[str]:
        """Hashes of the codes that may still claim ``platform`` (unused, unexpired)."""
        rows = await self._all(
            "SELECT code_hash FROM claim_codes WHERE platform = ?1 AND used_at IS NULL"
            " AND expires_at > ?2",
            platform,
            time.time(),
        )
        return [row[0] for row in rows]

    async def redeem_claim(self, code_hash: str, platform: str, user_key: str) -> bool:
        """Make ``user_key`` the owner of ``platform`` with a live code, in one transaction:
        False if the code is no longer live or the platform has been claimed meanwhile (by
        this worker or another: the platform's owner row is unique). Every other code for the
        platform is used up with it."""
        now = time.time()
        try:
            async with self._transaction() as tx:
                claimed = await tx.write(
                    "INSERT INTO claimed_owners (user_key, platform, claimed_at)"
                    " VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
                    user_key, platform, now,
                )  # fmt: skip
                if claimed != 1:
                    return False
                redeemed = await tx.write(
                    "UPDATE claim_codes SET used_at = ?1, used_by = ?2 WHERE code_hash = ?3"
                    " AND platform = ?4 AND used_at IS NULL AND expires_at > ?1",
                    now, user_key, code_hash, platform,
                )  # fmt: skip
                if redeemed != 1:
                    raise _ClaimLost
                await tx.write(
                    "UPDATE claim_codes SET used_at = ?1 WHERE platform = ?2 AND used_at IS NULL",
                    now,
                    platform,
                )
        except _ClaimLost:
            return False
        return True

    async def claimed_owners(self) -> list[ClaimedOwnerRow]:
        rows = await self._all(
            "SELECT user_key, platform, claimed_at FROM claimed_owners ORDER BY claimed_at"
        )
        return [cast(ClaimedOwnerRow, dict(row)) for row in rows]

    async def live_pairing_count(self) -> int:
        row = await self._one(
            "SELECT COUNT(*) FROM pairing_requests WHERE status = 'pending' AND expires_at > ?1",
            time.time(),
        )
        return int(row[0]) if row else 0

    async def web_pairings(self, limit: int) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT p.*, u.display_name FROM pairing_requests p"
            " LEFT JOIN users u ON u.user_key = p.user_key"
            " WHERE p.status = 'pending' AND p.expires_at > ?1 ORDER BY p.created_at LIMIT ?2",
            time.time(),
            limit,
        )
        return [dict(row) for row in rows]

    async def user_count(self) -> int:
        row = await self._one("SELECT COUNT(*) FROM users")
        return int(row[0]) if row else 0

    async def web_users(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        rows = await self._all(
            "SELECT * FROM users ORDER BY updated_at DESC, user_key LIMIT ?1 OFFSET ?2",
            limit,
            offset,
        )
        users = [dict(row) for row in rows]
        if not users:
            return users
        marks = ", ".join("?" for _ in users)
        checkins = await self._all(
            f"SELECT * FROM checkins WHERE user_key IN ({marks}) ORDER BY partner_id",
            *[user["user_key"] for user in users],
        )
        return with_checkins(users, [dict(row) for row in checkins])


def with_checkins(
    users: list[dict[str, Any]], checkins: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each user row with its check-in rows under ``checkins`` (both backends' last step)."""
    by_user: dict[str, list[dict[str, Any]]] = {}
    for row in checkins:
        by_user.setdefault(row["user_key"], []).append(row)
    return [{**user, "checkins": by_user.get(user["user_key"], [])} for user in users]
