"""The audit log and settings: who did what (for the owner and for accountability), page by page
for the web page, and the owner's settings overrides (``/admin settings``; config.toml stays the
base).

Part of :class:`bot.store.Store`; implemented once for both backends in
:class:`bot.store.audit.Audit`."""

from __future__ import annotations

from typing import Any, Protocol

from bot.store.admin_rows import AuditRow


class AuditStore(Protocol):
    """The audit log and the owner's settings overrides."""

    async def audit(self, actor: str, action: str, **detail: Any) -> None: ...

    async def audit_rows(self, action: str | None = None, limit: int = 100) -> list[AuditRow]: ...

    async def settings(self) -> dict[str, str]: ...

    async def put_setting(self, key: str, value: str) -> None: ...

    async def delete_setting(self, key: str) -> bool: ...

    async def audit_page(
        self, search: str = "", before_id: int | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Audit rows newest first, ``limit`` at a time below ``before_id``."""
