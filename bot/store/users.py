"""Users and access: people on each platform with their access, voice mode and time zone;
pairing requests of strangers; owner claims made with a one-time code."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

from bot.store.connection import Connection, SqliteBase
from bot.store.rows import ClaimedOwnerRow, PairingRow, UserRow

USER_BY_KEY = "SELECT * FROM users WHERE user_key = ?"


class Users(SqliteBase):
    """Users, pairing requests and owner claims."""

    def __init__(self, db: Connection, path: Path) -> None:
        super().__init__(db, path)
        # what upsert_user last wrote, so an unchanged name costs no write
        self._written_users: dict[str, tuple[str, str | None]] = {}

    async def upsert_user(
        self, user_key: str, platform: str, platform_user_id: str, name: str, username: str | None
    ) -> None:
        if self._written_users.get(user_key) == (name, username):
            return
        now = time.time()
        await self._sqlite_write(
            "INSERT INTO users (user_key, platform, platform_user_id, display_name, username,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (user_key) DO UPDATE SET display_name = excluded.display_name,"
            " username = excluded.username, updated_at = excluded.updated_at"
            " WHERE display_name IS NOT excluded.display_name"
            " OR username IS NOT excluded.username",
            (user_key, platform, platform_user_id, name, username, now, now),
        )
        self._written_users[user_key] = (name, username)

    async def user(self, user_key: str) -> UserRow | None:
        row = await self._sqlite_one(USER_BY_KEY, (user_key,))
        return cast(UserRow, dict(row)) if row else None

    async def set_user_access(self, user_key: str, access: str) -> bool:
        cursor = await self._sqlite_write(
            "UPDATE users SET access = ?, updated_at = ? WHERE user_key = ?",
            (access, time.time(), user_key),
        )
        return cursor.rowcount > 0

    async def voice_mode(self, user_key: str) -> str | None:
        row = await self._sqlite_one("SELECT voice_mode FROM users WHERE user_key = ?", (user_key,))
        return row[0] if row else None

    async def set_voice_mode(self, user_key: str, mode: str) -> None:
        await self._sqlite_write(
            "UPDATE users SET voice_mode = ?, updated_at = ? WHERE user_key = ?",
            (mode, time.time(), user_key),
        )

    async def set_user_timezone(self, user_key: str, timezone: str) -> None:
        await self._sqlite_write(
            "UPDATE users SET timezone = ?, updated_at = ? WHERE user_key = ?",
            (timezone, time.time(), user_key),
        )

    async def create_pairing(self, code: str, user_key: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._sqlite_write(
            "INSERT INTO pairing_requests (code, user_key, created_at, expires_at)"
            " VALUES (?, ?, ?, ?)",
            (code, user_key, now, now + ttl_seconds),
        )

    async def live_pairings(self, user_key: str | None = None) -> list[PairingRow]:
        sql = "SELECT * FROM pairing_requests WHERE status = 'pending' AND expires_at > ?"
        params: tuple[Any, ...] = (time.time(),)
        if user_key is not None:
            sql += " AND user_key = ?"
            params += (user_key,)
        return [
            cast(PairingRow, dict(row))
            for row in await self._sqlite_all(sql + " ORDER BY created_at", params)
        ]

    async def pairing(self, code: str) -> PairingRow | None:
        row = await self._sqlite_one("SELECT * FROM pairing_requests WHERE code = ?", (code,))
        return cast(PairingRow, dict(row)) if row else None

    async def close_pairing(self, code: str, status: str) -> None:
        await self._sqlite_write(
            "UPDATE pairing_requests SET status = ? WHERE code = ?", (status, code)
        )

    async def unannounced_approvals(self) -> list[PairingRow]:
        """Pairing requests approved (from the terminal) whose user has not been told yet."""
        rows = await self._sqlite_all(
            "SELECT * FROM pairing_requests WHERE status = 'approved' AND announced_at IS NULL"
            " ORDER BY created_at"
        )
        return [cast(PairingRow, dict(row)) for row in rows]

    async def take_announcement(self, code: str) -> bool:
        """Claim the telling of an approval: True for exactly one caller."""
        cursor = await self._sqlite_write(
            "UPDATE pairing_requests SET announced_at = ? WHERE code = ?"
            " AND status = 'approved' AND announced_at IS NULL",
            (time.time(), code),
        )
        return cursor.rowcount == 1

    async def add_claim_code(self, code_hash: str, platform: str, ttl_seconds: float) -> None:
        now = time.time()
        await self._sqlite_write(
            "INSERT INTO claim_codes (code_hash, platform, created_at, expires_at)"
            " VALUES (?, ?, ?, ?)",
            (code_hash, platform, now, now + ttl_seconds),
        )

    async def live_claim_codes(self, platform: str) -> list[str]:
        """Hashes of the codes that may still claim ``platform`` (unused, unexpired)."""
        rows = await self._sqlite_all(
            "SELECT code_hash FROM claim_codes WHERE platform = ? AND used_at IS NULL"
            " AND expires_at > ?",
            (platform, time.time()),
        )
        return [row[0] for row in rows]

    async def redeem_claim(self, code_hash: str, platform: str, user_key: str) -> bool:
        """Make ``user_key`` the owner of ``platform`` with a live code, in one transaction:
        False if the code is no longer live or the platform has been claimed meanwhile. Every
        other code for the platform is used up with it."""
        now = time.time()
        async with self._transaction():
            taken = await self._db.execute_fetchall(
                "SELECT 1 FROM claimed_owners WHERE platform = ?", (platform,)
            )
            if list(taken):
                return False
            cursor = await self._db.execute(
                "UPDATE claim_codes SET used_at = ?, used_by = ? WHERE code_hash = ?"
                " AND platform = ? AND used_at IS NULL AND expires_at > ?",
                (now, user_key, code_hash, platform, now),
            )
            if cursor.rowcount != 1:
                return False
            await self._db.execute(
                "INSERT INTO claimed_owners (user_key, platform, claimed_at) VALUES (?, ?, ?)",
                (user_key, platform, now),
            )
            await self._db.execute(
                "UPDATE claim_codes SET used_at = ? WHERE platform = ? AND used_at IS NULL",
                (now, platform),
            )
        return True

    async def claimed_owners(self) -> list[ClaimedOwnerRow]:
        rows = await self._sqlite_all(
            "SELECT user_key, platform, claimed_at FROM claimed_owners ORDER BY claimed_at"
        )
        return [cast(ClaimedOwnerRow, dict(row)) for row in rows]

    async def live_pairing_count(self) -> int:
        row = await self._sqlite_one(
            "SELECT COUNT(*) FROM pairing_requests WHERE status = 'pending' AND expires_at > ?",
            (time.time(),),
        )
        return int(row[0]) if row else 0

    async def web_pairings(self, limit: int) -> list[dict[str, Any]]:
        rows = await self._sqlite_all(
            "SELECT p.*, u.display_name FROM pairing_requests p"
            " LEFT JOIN users u ON u.user_key = p.user_key"
            " WHERE p.status = 'pending' AND p.expires_at > ? ORDER BY p.created_at LIMIT ?",
            (time.time(), limit),
        )
        return [dict(row) for row in rows]

    async def user_count(self) -> int:
        row = await self._sqlite_one("SELECT COUNT(*) FROM users")
        return int(row[0]) if row else 0

    async def web_users(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        rows = await self._sqlite_all(
            "SELECT * FROM users ORDER BY updated_at DESC, user_key LIMIT ? OFFSET ?",
            (limit, offset),
        )
        users = [dict(row) for row in rows]
        if not users:
            return users
        marks = ", ".join("?" for _ in users)
        checkins = await self._sqlite_all(
            f"SELECT * FROM checkins WHERE user_key IN ({marks}) ORDER BY partner_id",
            [user["user_key"] for user in users],
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
