"""``companion run`` and ``companion chat``: the gateway on every configured channel, or a
conversation in this terminal; the claim codes shown while nobody owns a platform."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
from pathlib import Path

from adapters.base import Channel
from bot.app import App, build_app
from bot.app.channels import Console, console, platform_channels, token_checkers
from bot.cli import terminal
from bot.cli.data import CLIError
from bot.cli.invocation import command
from bot.cli.setup_wizard import SetupOptions, run_setup
from bot.config.model import Config, config_path, load_config
from bot.gateway.access import CONSOLE_OWNER
from bot.gateway.claims import claim_notice
from bot.services.llm import configuration_problem
from bot.services.llm_check import check_endpoint
from bot.turn.sessions import Speaker

logger = logging.getLogger("companion")


NO_CHANNEL = (
    "no chat token is set (telegram.token, discord.token) and stdin is not a terminal, so there "
    "is nobody to talk to: run `{setup}` to add a token, or start with a terminal "
    "(docker run -it) to chat in the console"
)


NO_TOKEN = (
    "No Telegram or Discord token is set: opening the console so you can talk to a partner "
    "here. (To go online, give `{setup}` a bot token.)"
)


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    if (missing := missing_config(config, args)) is not None:
        config = setup_first(missing, args)
    channels = platform_channels(config)
    if not channels:
        if not stdin_can_carry_input():
            raise CLIError(NO_CHANNEL.format(setup=command("setup", args.config)))
        why = NO_TOKEN.format(setup=command("setup", args.config))
        return asyncio.run(console_session(config, None, why))
    return asyncio.run(serve(config, channels))


def stdin_can_carry_input() -> bool:
    """Whether the console could ever read a line: a terminal, a pipe or a file with text.

    A container started without ``-it`` and a service manager give the process /dev/null (or
    no stdin at all): the console would end at once, exit 0, and a restart policy would start
    it again forever. Pipes stay accepted, so ``echo hi | companion run`` still works."""
    try:
        descriptor = sys.stdin.fileno()
        info = os.fstat(descriptor)
    except (AttributeError, OSError, ValueError):
        return False  # stdin closed or absent
    if os.isatty(descriptor):
        return True
    if stat.S_ISCHR(info.st_mode):  # a device that is not a terminal: /dev/null
        return False
    if stat.S_ISREG(info.st_mode):
        return info.st_size > 0
    return True


def cmd_chat(config: Config, args: argparse.Namespace) -> int:
    if (missing := missing_config(config, args)) is not None:
        config = setup_first(missing, args)
    return asyncio.run(console_session(config, args.partner))


def missing_config(config: Config, args: argparse.Namespace) -> Path | None:
    """The config file to write first: there is none, and nothing set the LLM otherwise
    (a container configured by COMPANION_* variables alone goes on)."""
    path = config_path(Path(args.config) if args.config else None)
    if path is None or path.exists() or configuration_problem(config.llm) is None:
        return None
    return path


def setup_first(path: Path, args: argparse.Namespace) -> Config:
    """At a terminal, setup's questions, then the config they wrote, so the command goes on
    as asked (``make run`` on a fresh clone ends in a conversation); where nobody can type,
    one line saying what to run."""
    setup = command("setup", args.config)
    if not stdin_is_terminal():
        raise CLIError(f"no {path.name}: run `{setup}`")
    terminal.say(f"No {path.name} yet: starting `{setup}` first.")
    asyncio.run(run_setup(path, SetupOptions(), token_checkers(), args.config, then_run=True))
    return load_config(Path(args.config) if args.config else None)


def stdin_is_terminal() -> bool:
    try:
        return os.isatty(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        return False


async def check_llm(config: Config, fatal: bool) -> None:
    """The endpoint's model list, without spending a call: enough to find a wrong address,
    a missing /v1, an unknown model or a refused key before anyone writes."""
    problem = (
        configuration_problem(config.llm) or (await check_endpoint(config.llm, call=False)).problem
    )
    if problem is None:
        return
    if fatal:
        raise CLIError(problem)
    logger.warning("%s (the gateway keeps running and apologises until it is fixed)", problem)


async def console_session(config: Config, partner_id: str | None, why: str = "") -> int:
    """The conversation in this terminal; ``why`` is said first, once the data directory is
    this process's (a gateway already running is said instead)."""
    await check_llm(config, fatal=True)
    terminal_chat = console(config)
    chat_key = terminal_chat.chat_key
    app = await build_app(config, terminal_chat.channels)
    if why:
        print(why, file=sys.stderr)
    try:
        partner = app.catalog.require(partner_id).id if partner_id else default_partner(app)
        await app.store.upsert_chat(chat_key, "console", "console", None, "dm", "console")
        if partner is not None and await app.store.selected_partner(chat_key) != partner:
            await app.store.select_partner(chat_key, partner)
            await app.sessions.end_chat(chat_key, "partner changed")
        name = app.catalog.require(partner).name if partner else "your assistant"
        print(f"Talking with {name}. /help lists commands; Ctrl-D ends.", file=sys.stderr)
        await greet_in_console(app, terminal_chat, partner)  # before the first line is read
        await app.start()
        # at a terminal, Ctrl-C stops the partner's turn (the console's), not the session
        stops = (signal.SIGTERM,) if terminal_chat.interactive else (signal.SIGINT, signal.SIGTERM)
        await wait_for_stop(terminal_chat.finished, stops)
        await app.dispatcher.idle()
    finally:
        await app.stop()
    return 0


async def greet_in_console(app: App, terminal_chat: Console, partner_id: str | None) -> None:
    """A card's greeting opens the console's conversation when none is open, as picking the
    partner does on Telegram and Discord (``bot/delivery/greeter.py``)."""
    partner = app.catalog.get(partner_id) if partner_id else None
    if partner is None or app.gateway.greeter is None:
        return
    speaker = Speaker(CONSOLE_OWNER, terminal_chat.user_name, is_owner=True)
    await app.gateway.greeter.greet(terminal_chat.chat_key, partner, speaker)


def default_partner(app: App) -> str | None:
    wanted = app.config.partners.default
    if wanted and app.catalog.get(wanted):
        return wanted
    partners = app.catalog.all()
    return partners[0].id if partners else None


async def serve(config: Config, channels: dict[str, Channel]) -> int:
    await check_llm(config, fatal=False)
    app = await build_app(config, channels, show_on_terminal)
    try:
        await app.start()
        logger.info("gateway running on %s", ", ".join(channels))
        await offer_claims(app)
        await wait_for_stop(asyncio.Event())
    finally:
        logger.info("stopping")
        await app.stop()
    return 0


def show_on_terminal(lines: list[str]) -> None:
    terminal.announce(*lines)


async def offer_claims(app: App) -> None:
    """A claim code on the terminal for each connected platform that nobody owns yet."""
    claims = app.gateway.claims
    for platform in app.channels:
        if claims.unclaimed(platform):
            code = await claims.issue(platform)
            username = app.gateway.bot_usernames.get(platform)
            terminal.announce(*claim_notice(platform, code, username))


async def wait_for_stop(
    done: asyncio.Event, signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
) -> None:
    """Until ``done`` is set or one of ``signals`` arrives."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(done.wait())]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
