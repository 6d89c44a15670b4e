"""``companion doctor``'s findings, and its lines for the chat tokens: each platform's bot
token and the partners' own Telegram bots (``[telegram.bots]``), as the platform's check
(``bot/app/channels.py``) saw them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.base import TokenCheck

TokenChecker = Callable[[], Awaitable[TokenCheck]]
PartnerBotsChecker = Callable[[], Awaitable[dict[str, TokenCheck]]]
"""Partner id -> what Telegram said of that partner's own bot."""


@dataclass(frozen=True)
class Finding:
    ok: bool | None
    """True ok, False a problem, None a fact worth showing."""
    text: str

    def line(self) -> str:
        mark = {True: "ok ", False: "BAD", None: "   "}[self.ok]
        return f"{mark} {self.text}"


async def token_findings(platform: str, check: TokenChecker) -> list[Finding]:
    result = await check()
    findings = [Finding(None, f"{platform}.token: set (hidden)")]
    if result.identity:
        findings.append(Finding(True, f"{platform}: the token works for {result.identity}"))
    if result.problem:
        findings.append(Finding(False, result.problem))
    findings += [Finding(None, f"{platform}: {note}") for note in result.notes]
    return findings


def partner_bot_findings(checks: dict[str, TokenCheck]) -> list[Finding]:
    """One line per partner's own Telegram bot: whom it speaks as, or what to fix."""
    return [
        Finding(False, check.problem)
        if check.problem
        else Finding(True, f"telegram.bots.{partner_id}: speaks as {check.identity} in groups")
        for partner_id, check in sorted(checks.items())
    ]
