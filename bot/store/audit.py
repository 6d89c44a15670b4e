"""The audit log (who did what, for the owner and for accountability) and the owner's
settings overrides (``/admin settings`` writes them; config.toml stays the base)."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.store.connection import SqliteBase
from bot.store.rows import AuditRow


class Audit(SqliteBase):
    """The audit log and the owner's stored settings."""

    async def audit(self, actor: str, action: str, **detail: Any) -> None:
        await self._sqlite_write(
            "INSERT INTO audit (time, actor, action, detail) VALUES (?, ?, ?, ?)",
            (time.time(), actor, action, json.dumps(detail, ensure_ascii=False, default=str)),
        )

    async def audit_rows(self, action: str | None = None, limit: int = 100) -> list[AuditRow]:
        sql = "SELECT time, actor, action, detail FROM audit"
        params: tuple[Any, ...] = ()
        if action is not None:
            sql += " WHERE action = ?"
            params = (action,)
        rows = await self._sqlite_all(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        return [
            AuditRow(time=time, actor=actor, action=action, detail=json.loads(detail))
            for time, actor, action, detail in rows
        ]

    async def settings(self) -> dict[str, str]:
        return {row[0]: row[1] for row in await self._sqlite_all("SELECT key, value FROM settings")}

    async def put_setting(self, key: str, value: str) -> None:
        await self._sqlite_write(
            "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
            " updated_at = excluded.updated_at",
            (key, value, time.time()),
        )

    async def delete_setting(self, key: str) -> bool:
        cursor = await self._sqlite_write("DELETE FROM settings WHERE key = ?", (key,))
        return cursor.rowcount > 0

    async def audit_page(
        self, search: str = "", before_id: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Audit rows newest first, ``limit`` at a time below ``before_id``; ``search``
        keeps rows whose actor or action contains it."""
        sql = "SELECT id, time, actor, action, detail FROM audit WHERE 1 = 1"
        params: list[Any] = []
        if search:
            sql += " AND (instr(lower(actor), ?) > 0 OR instr(lower(action), ?) > 0)"
            params += [search.lower(), search.lower()]
        if before_id is not None:
            sql += " AND id < ?"
            params.append(before_id)
        rows = [
            dict(row)
            for row in await self._sqlite_all(sql + " ORDER BY id DESC LIMIT ?", (*params, limit))
        ]
        for row in rows:
            row["detail"] = json.loads(row["detail"])
        return rows
