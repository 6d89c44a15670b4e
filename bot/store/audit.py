"""The audit log (who did what, for the owner and for accountability) and the owner's
settings overrides (``/admin settings`` writes them; config.toml stays the base), one query
text for both backends."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.store.admin_rows import AuditRow
from bot.store.base import StoreBase


class Audit(StoreBase):
    """The audit log and the owner's stored settings."""

    async def audit(self, actor: str, action: str, **detail: Any) -> None:
        await self._write(
            "INSERT INTO audit (time, actor, action, detail) VALUES (?1, ?2, ?3, ?4)",
            time.time(),
            actor,
            action,
            json.dumps(detail, ensure_ascii=False, default=str),
        )

    async def audit_rows(self, action: str | None = None, limit: int = 100) -> list[AuditRow]:
        rows = await self._all(
            "SELECT time, actor, action, detail FROM audit"
            " WHERE action = coalesce(?1, action) ORDER BY id DESC LIMIT ?2",
            action,
            limit,
        )
        return [
            AuditRow(time=time, actor=actor, action=action, detail=json.loads(detail))
            for time, actor, action, detail in rows
        ]

    async def audit_page(
        self, search: str = "", before_id: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Audit rows newest first, ``limit`` at a time below ``before_id``; ``search``
        keeps rows whose actor or action contains it."""
        rows = await self._all(
            "SELECT id, time, actor, action, detail FROM audit"
            " WHERE (?1 = '' OR strpos(lower(actor), ?1) > 0 OR strpos(lower(action), ?1) > 0)"
            " AND id < coalesce(?2, id + 1) ORDER BY id DESC LIMIT ?3",
            search.lower(),
            before_id,
            limit,
        )
        return [{**dict(row), "detail": json.loads(row["detail"])} for row in rows]

    async def settings(self) -> dict[str, str]:
        return {row[0]: row[1] for row in await self._all("SELECT key, value FROM settings")}

    async def put_setting(self, key: str, value: str) -> None:
        await self._write(
            "INSERT INTO settings (key, value, updated_at) VALUES (?1, ?2, ?3)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at",
            key,
            value,
            time.time(),
        )

    async def delete_setting(self, key: str) -> bool:
        return await self._write("DELETE FROM settings WHERE key = ?1", key) > 0
