"""Pairing decided at the terminal: ``companion pairing list | approve CODE | deny CODE``.

For the owner who has no chat of their own with the bot yet (nobody claimed it) or prefers the
shell. These commands open the database beside a running gateway (SQLite in WAL mode, shared
safely); the gateway notices an approval within seconds and tells the user they are in.
Every decision is written to the audit log with the actor ``terminal``.
"""

from __future__ import annotations

import time

from bot.cli.invocation import program
from bot.cli.terminal import printable
from bot.config.model import Config
from bot.gateway.access import Access, AccessError, OwnerCheck
from bot.store import Store

ACTOR = "terminal"


async def pending_lines(store: Store) -> list[str]:
    """One line per live pairing request: code, who, and how long the code still works."""
    lines = []
    for request in await store.live_pairings():
        user = await store.user(request["user_key"])
        name = printable(user["display_name"] if user and user["display_name"] else "?")
        handle = f" @{printable(user['username'])}" if user and user["username"] else ""
        minutes = max(1, round((request["expires_at"] - time.time()) / 60))
        lines.append(
            f"{request['code']}  {name}{handle} ({printable(request['user_key'])}), "
            f"expires in {minutes} min"
        )
    return lines


async def approve(config: Config, store: Store, code: str) -> str:
    """Let the user of ``code`` in; the running gateway tells them (see App)."""
    user_key = await _access(config, store).approve(code)
    await store.audit(ACTOR, "pairing approve", code=code.upper(), user=user_key)
    return user_key


async def deny(config: Config, store: Store, code: str) -> str:
    user_key = await _access(config, store).deny(code)
    await store.audit(ACTOR, "pairing deny", code=code.upper(), user=user_key)
    return user_key


def _access(config: Config, store: Store) -> Access:
    # deciding a request never asks who the owner is
    return Access(config, store, OwnerCheck(set()))


def terminal_hint(error: AccessError) -> str:
    """An access error worded for the shell: the chat command it names is not at hand."""
    return str(error).replace("/admin pending", f"{program()} pairing list")
