"""``companion pairing list|approve|deny``: pairing requests decided from a shell, beside a
running gateway (``bot/cli/pairing_terminal.py``)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from bot.cli import pairing_terminal
from bot.cli.data import CLIError
from bot.config.model import Config
from bot.gateway.access import AccessError
from bot.store import Store
from bot.store.opening import open_store

T = TypeVar("T")


def _with_store(config: Config, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` on the database, opened beside any running gateway."""

    async def go() -> T:
        store = await open_store(config.database)
        try:
            return await work(store)
        except AccessError as exc:
            raise CLIError(pairing_terminal.terminal_hint(exc)) from None
        finally:
            await store.close()

    return asyncio.run(go())


def cmd_pairing_list(config: Config, args: argparse.Namespace) -> int:
    del args
    lines = _with_store(config, pairing_terminal.pending_lines)
    print("\n".join(lines) if lines else "No pairing requests are waiting.")
    return 0


def cmd_pairing_approve(config: Config, args: argparse.Namespace) -> int:
    user_key = _with_store(config, lambda store: pairing_terminal.approve(config, store, args.code))
    print(f"approved {user_key}; a running gateway tells them within seconds")
    return 0


def cmd_pairing_deny(config: Config, args: argparse.Namespace) -> int:
    user_key = _with_store(config, lambda store: pairing_terminal.deny(config, store, args.code))
    print(f"refused the request from {user_key}")
    return 0
