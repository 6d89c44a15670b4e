"""The ``companion`` command: set up, run the gateway, chat in the terminal, look after the data.

``setup`` writes config.toml (``bot/setup_wizard.py``). ``run``, ``chat``, ``import`` and
``reindex`` write and take the data directory's lock; ``search``, ``memory show``,
``pairing``, ``doctor``, ``backup`` and ``health`` work beside a running gateway (``pairing``
writes its decisions to the shared database). Problems the owner can fix (config, a busy data
directory, no LLM) end with one clear message and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import signal
import stat
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from adapters.base import Channel, TokenCheck
from adapters.console_channel import CONSOLE_CHAT, ConsoleChannel
from bot import pairing_terminal, terminal
from bot.access import AccessError
from bot.app import App, DataDirBusy, DataDirLock, build_app, owner_memory_file
from bot.backup import write_backup
from bot.claims import claim_notice
from bot.cli_cards import CardCommandError, add_card_commands
from bot.config import Config, ConfigError, config_path, load_config
from bot.doctor import TokenChecker, examine
from bot.embedder import reindex
from bot.embeddings import EmbeddingsClient, EmbeddingsUnavailable
from bot.health import check_health
from bot.llm import configuration_problem
from bot.llm_check import check_endpoint
from bot.setup_wizard import SetupError, SetupOptions, run_setup
from bot.store import NewMessage, Store, StoreError
from partners.catalog import PartnerCatalog
from partners.memory import read_text
from partners.persona import Partner, PartnerError, check_partner_id
from partners.recall import Recall
from partners.tools import format_hit, user_memory_file

logger = logging.getLogger("companion")

EXIT_PROBLEM = 2
T = TypeVar("T")


class CLIError(Exception):
    """A problem the owner can fix; printed without a traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose if "verbose" in args else 0, quiet=args.command == "chat")
    try:
        if args.command == "setup":  # writes the config: it may not exist or load yet
            return cmd_setup(args)
        config = load_config(Path(args.config) if args.config else None)
        return int(args.handler(config, args) or 0)
    except (
        ConfigError,
        CLIError,
        CardCommandError,
        DataDirBusy,
        StoreError,
        PartnerError,
        SetupError,
    ) as exc:
        print(f"companion: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    except KeyboardInterrupt:
        return 130


def setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO
    if quiet and not verbose:
        level = logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # httpx logs every request URL at INFO, and Telegram URLs carry the bot token (PTB's
    # own debug log names its API URL too, so all of "telegram" stays at WARNING). The
    # openai client 3.x brings its own fork, httpx2/httpcore2, which logs the same way.
    noisy_loggers = ("httpx", "httpcore", "httpx2", "httpcore2", "openai", "telegram", "discord")
    for noisy in (*noisy_loggers, "apscheduler"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


IMPORT_FORMAT = """\
FILE holds one JSON object per line:
  session  any text that groups lines into one conversation (required)
  user     who spoke with the partner: "telegram:123", "discord:456" or any name (required)
  role     "user" or "assistant" (required)
  text     what was said (required)
  time     ISO 8601 ("2026-01-02T10:00:00Z") or epoch seconds (required)
  title    the conversation's title (optional; default: its first text)
  id       a stable id for the line, returned by `search --json` (optional)
Example line:
  {"session": "s1", "user": "telegram:5", "role": "user", "text": "We fly to Tokyo next week", \
"time": "2026-01-02T10:00:00Z", "id": "old-1"}
Importing the same file twice adds nothing.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="companion",
        description="AI companions with private long-term memory on Telegram, Discord and "
        "this terminal. New here? Start with `companion setup`.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="config file (default: $COMPANION_CONFIG, else ./config.toml)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (-vv: debug)")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="what to do (COMMAND --help: more)"
    )

    add_setup_command(sub)

    run = sub.add_parser("run", help="run the gateway on every configured channel")
    run.set_defaults(handler=cmd_run)

    chat = sub.add_parser("chat", help="talk to a partner in this terminal, as the owner")
    chat.add_argument(
        "partner", nargs="?", help="partner id (default: [partners] default, else the first)"
    )
    chat.set_defaults(handler=cmd_chat)

    add_partner_commands(sub)

    pairing = sub.add_parser("pairing", help="decide pairing requests from this terminal")
    pairsub = pairing.add_subparsers(
        dest="action", required=True, metavar="ACTION", help="list, approve or deny"
    )
    pairsub.add_parser("list", help="the requests waiting, with their codes").set_defaults(
        handler=cmd_pairing_list
    )
    papprove = pairsub.add_parser("approve", help="let a user in (they are told at once)")
    papprove.add_argument("code", help="the code the user was given (case does not matter)")
    papprove.set_defaults(handler=cmd_pairing_approve)
    pdeny = pairsub.add_parser("deny", help="refuse a request")
    pdeny.add_argument("code", help="the code the user was given (case does not matter)")
    pdeny.set_defaults(handler=cmd_pairing_deny)

    memory = sub.add_parser("memory", help="show a partner's memory")
    msub = memory.add_subparsers(dest="action", required=True, metavar="ACTION", help="show")
    mshow = msub.add_parser("show", help="the owner's shared memory and the partner's own")
    mshow.add_argument("partner", help="partner id")
    mshow.add_argument("--user", metavar="PLATFORM:ID", help="also show this user's file")
    mshow.set_defaults(handler=cmd_memory_show)

    search = sub.add_parser("search", help="search a partner's past conversations")
    search.add_argument("partner", help="partner id")
    search.add_argument("query", nargs="?", help="omit to read one query per line from stdin")
    search.add_argument("--user", metavar="PLATFORM:ID", help="only what this user may see")
    search.add_argument("--limit", type=int, default=30, help="most hits to show (1-100)")
    search.add_argument("--json", action="store_true", help="print JSON instead of text")
    search.set_defaults(handler=cmd_search)

    reindex = sub.add_parser(
        "reindex",
        help="embed past messages for semantic recall (after [embeddings] is set or its model"
        " changed)",
    )
    reindex.add_argument("partner", nargs="?", help="partner id (default: every partner)")
    reindex.set_defaults(handler=cmd_reindex)

    imp = sub.add_parser(
        "import",
        help="import past conversations from a JSONL file",
        epilog=IMPORT_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("partner", help="partner id the conversations were with")
    imp.add_argument("file", help="the JSONL file (format below)")
    imp.set_defaults(handler=cmd_import)

    sub.add_parser(
        "doctor", help="check config, data, partners, the LLM endpoint and chat tokens"
    ).set_defaults(handler=cmd_doctor)
    backup = sub.add_parser("backup", help="write a consistent archive of the data")
    backup.add_argument("file", nargs="?", help="the .tar.gz to write (default: in data/backups)")
    backup.set_defaults(handler=cmd_backup)
    sub.add_parser(
        "health", help="exit 0 if a running gateway is alive and connected (for healthchecks)"
    ).set_defaults(handler=cmd_health)
    return parser


SETUP_EXAMPLES = """\
With no setting given, setup asks (answers may be piped in). With any, it asks nothing:
  companion setup --llm-base-url http://127.0.0.1:11434/v1 --model llama3.2 \\
      --telegram-token-env TELEGRAM_BOT_TOKEN
  companion setup --data-dir /data --llm-base-url https://api.openai.com/v1 \\
      --model gpt-4o-mini --api-key-env OPENAI_API_KEY --discord-token-env DISCORD_BOT_TOKEN
Every value is checked live before the file is written; comments in it are kept.
"""


def add_setup_command(sub: Any) -> None:
    setup = sub.add_parser(
        "setup",
        help="write or update config.toml, checking the endpoint and tokens live",
        epilog=SETUP_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    setup.add_argument("--llm-base-url", metavar="URL", help="the OpenAI-compatible endpoint")
    setup.add_argument("--model", help="the model for chat turns")
    setup.add_argument(
        "--api-key-env", metavar="VAR", help='write llm.api_key = "${VAR}" (hosted endpoints)'
    )
    setup.add_argument(
        "--telegram-token-env", metavar="VAR", help='write telegram.token = "${VAR}"'
    )
    setup.add_argument("--discord-token-env", metavar="VAR", help='write discord.token = "${VAR}"')
    setup.add_argument(
        "--telegram-owner", metavar="ID", type=int, help="add your Telegram user id as owner"
    )
    setup.add_argument(
        "--discord-owner", metavar="ID", type=int, help="add your Discord user id as owner"
    )
    setup.add_argument("--data-dir", metavar="DIR", help="storage.data_dir (in Docker: /data)")
    setup.add_argument(
        "--web",
        action="store_const",
        const=True,
        help="turn on the owner's web page ([web] enabled = true; /admin web logs you in)",
    )
    setup.add_argument(
        "--no-check", action="store_true", help="write without checking (an offline build)"
    )


def cmd_setup(args: argparse.Namespace) -> int:
    options = SetupOptions(
        llm_base_url=args.llm_base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        telegram_token_env=args.telegram_token_env,
        discord_token_env=args.discord_token_env,
        telegram_owner=args.telegram_owner,
        discord_owner=args.discord_owner,
        data_dir=args.data_dir,
        web=args.web,
        check=not args.no_check,
    )
    path = config_path(Path(args.config) if args.config else None)
    asyncio.run(run_setup(path, options, token_checkers()))
    return 0


def add_partner_commands(sub: Any) -> None:
    partners = sub.add_parser(
        "partners", help="list, create, clone, delete, import or export partners"
    )
    psub = partners.add_subparsers(
        dest="action",
        required=True,
        metavar="ACTION",
        help="list, new, clone, delete, import (a character card) or export (as one)",
    )
    psub.add_parser("list", help="every partner, and those that did not load").set_defaults(
        handler=cmd_partners_list
    )
    pnew = psub.add_parser("new", help="create a partner from the template")
    pnew.add_argument("id", help="its id: a-z, 0-9, - and _, up to 32 characters")
    pnew.add_argument("--name", help="the name it goes by (asked if not given)")
    pnew.set_defaults(handler=cmd_partners_new)
    pclone = psub.add_parser("clone", help="copy a partner without journals or user memory")
    pclone.add_argument("source", help="id of the partner to copy")
    pclone.add_argument("id", help="id of the new partner")
    pclone.set_defaults(handler=cmd_partners_clone)
    pdel = psub.add_parser("delete", help="move a partner to data/partners/.trash")
    pdel.add_argument("id", help="id of the partner to delete")
    pdel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    pdel.set_defaults(handler=cmd_partners_delete)
    add_card_commands(psub, sub)


def package_version() -> str:
    try:
        return metadata.version("companion-gateway")
    except metadata.PackageNotFoundError:
        return "unknown (not installed; run make)"


# ---- run and chat ----------------------------------------------------------------------


def platform_channels(config: Config) -> dict[str, Channel]:
    channels: dict[str, Channel] = {}
    if config.telegram.token is not None:
        from adapters.telegram_channel import TelegramChannel

        channels["telegram"] = TelegramChannel(config.telegram, config.owner.telegram_ids)
    if config.discord.token is not None:
        from adapters.discord_channel import DiscordChannel

        channels["discord"] = DiscordChannel(config.discord)
    return channels


NO_CHANNEL = (
    "no chat token is set (telegram.token, discord.token) and stdin is not a terminal, so there "
    "is nobody to talk to: run `companion setup` to add a token, or start with a terminal "
    "(docker run -it) to chat in the console"
)


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    del args
    channels = platform_channels(config)
    if not channels:
        if not stdin_can_carry_input():
            raise CLIError(NO_CHANNEL)
        print(
            "No Telegram or Discord token is set: opening the console so you can talk to a "
            "partner here. (Add a token to config.toml to go online.)",
            file=sys.stderr,
        )
        return asyncio.run(console_session(config, None))
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
    return asyncio.run(console_session(config, args.partner))


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


async def console_session(config: Config, partner_id: str | None) -> int:
    await check_llm(config, fatal=True)
    console = ConsoleChannel(exports=config.data_dir / "exports")
    console.keep_logs_off_the_terminal()
    app = await build_app(config, {"console": console})
    try:
        partner = app.catalog.require(partner_id).id if partner_id else default_partner(app)
        await app.store.upsert_chat(CONSOLE_CHAT.key, "console", "console", None, "dm", "console")
        if partner is not None and await app.store.selected_partner(CONSOLE_CHAT.key) != partner:
            await app.store.select_partner(CONSOLE_CHAT.key, partner)
            await app.sessions.end_chat(CONSOLE_CHAT.key, "partner changed")
        name = app.catalog.require(partner).name if partner else "your assistant"
        print(f"Talking with {name}. /help lists commands; Ctrl-D ends.", file=sys.stderr)
        await app.start()
        # at a terminal, Ctrl-C stops the partner's turn (the console's), not the session
        stops = (signal.SIGTERM,) if console.interactive else (signal.SIGINT, signal.SIGTERM)
        await wait_for_stop(console.finished, stops)
        await app.dispatcher.idle()
    finally:
        await app.stop()
    return 0


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


# ---- partners and memory ---------------------------------------------------------------


def _catalog(config: Config) -> PartnerCatalog:
    catalog = PartnerCatalog(config.data_dir / "partners")
    catalog.reload()
    return catalog


def _locked(config: Config) -> DataDirLock:
    lock = DataDirLock(config.data_dir)
    lock.acquire()
    return lock


def cmd_partners_list(config: Config, args: argparse.Namespace) -> int:
    del args
    catalog = _catalog(config)
    for p in catalog.all():
        print(f"{p.id}\t{p.name}\t{p.preset.memory_scope}\t{p.preset.description}")
    for partner_id, error in catalog.errors.items():
        print(f"{partner_id}\tNOT LOADED: {error}")
    return 0


def cmd_partners_new(config: Config, args: argparse.Namespace) -> int:
    check_partner_id(args.id)
    name = args.name or terminal.ask(f"Name for the new partner {args.id!r}")
    if not name:
        raise CLIError(f"a new partner needs a name: companion partners new {args.id} --name NAME")
    lock = _locked(config)
    try:
        partner = _catalog(config).create(args.id, name)
    finally:
        lock.release()
    print(f"created {partner.name} ({partner.id}) in {partner.dir}; edit its Markdown files")
    return 0


def cmd_partners_clone(config: Config, args: argparse.Namespace) -> int:
    lock = _locked(config)
    try:
        partner = _catalog(config).clone(args.source, args.id)
    finally:
        lock.release()
    print(f"cloned {args.source} to {partner.id} (without journals or per-user memory)")
    return 0


def cmd_partners_delete(config: Config, args: argparse.Namespace) -> int:
    partner = _catalog(config).require(args.id)
    if not args.yes:
        answer = terminal.confirm(
            f"Move {partner.name} ({partner.id}) and its memory to the trash?"
        )
        if answer is None:
            raise CLIError("nothing deleted; to delete without a question add --yes")
        if not answer:
            print("nothing deleted", file=sys.stderr)
            return 1
    lock = _locked(config)
    try:
        destination = _catalog(config).delete(args.id)
    finally:
        lock.release()
    print(f"moved {args.id} to {destination}")
    return 0


def cmd_memory_show(config: Config, args: argparse.Namespace) -> int:
    partner = _catalog(config).require(args.partner)
    owner = read_text(owner_memory_file(config).path).strip()
    print("## Owner's shared memory\n" + (owner or "(empty)"))
    own = read_text(partner.dir / "MEMORY.md").strip()
    print(f"\n## {partner.name}'s own memory\n" + (own or "(empty)"))
    if args.user:
        text = read_text(user_memory_file(partner, args.user).path).strip()
        print(f"\n## About {args.user}\n" + (text or "(empty)"))
    return 0


# ---- pairing ---------------------------------------------------------------------------


def _with_store(config: Config, work: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``work`` on the database, opened beside any running gateway."""

    async def go() -> T:
        store = await Store.open(config.data_dir / "gateway.db")
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


# ---- search and import -----------------------------------------------------------------


def cmd_search(config: Config, args: argparse.Namespace) -> int:
    partner = _catalog(config).require(args.partner)
    if not 1 <= args.limit <= 100:
        raise CLIError("--limit must be between 1 and 100")
    audiences = None if args.user is None else [f"user:{args.user}"]

    async def go() -> None:
        store = await Store.open(config.data_dir / "gateway.db")
        embeddings = (
            EmbeddingsClient(config.embeddings, config.llm) if config.embeddings.enabled else None
        )
        recall = Recall.configured(store, embeddings, config.embeddings)
        try:
            queries = [args.query] if args.query is not None else None
            if queries is None:
                for line in sys.stdin:
                    if line.strip():
                        hits = await recall.search(partner.id, line.strip(), audiences, args.limit)
                        print(
                            json.dumps(
                                {"query": line.strip(), "results": _hits_json(hits)},
                                ensure_ascii=False,
                            ),
                            flush=True,
                        )
                return
            hits = await recall.search(partner.id, args.query, audiences, args.limit)
            if args.json:
                print(
                    json.dumps(
                        {"query": args.query, "results": _hits_json(hits)}, ensure_ascii=False
                    )
                )
            else:
                language = partner.preset.language
                print("\n".join(format_hit(h, args.query, language) for h in hits) or "no matches")
        finally:
            if embeddings is not None:
                await embeddings.close()
            await store.close()

    asyncio.run(go())
    return 0


def cmd_reindex(config: Config, args: argparse.Namespace) -> int:
    if not config.embeddings.enabled:
        raise CLIError(
            "semantic recall is off: set [embeddings] base_url and model in config.toml first "
            '(README, "Recall")'
        )
    partner_id = _catalog(config).require(args.partner).id if args.partner else None
    lock = _locked(config)
    try:
        embedded = asyncio.run(_reindex(config, partner_id))
    finally:
        lock.release()
    print(f"embedded {embedded} messages with {config.embeddings.model}")
    return 0


async def _reindex(config: Config, partner_id: str | None) -> int:
    store = await Store.open(config.data_dir / "gateway.db")
    client = EmbeddingsClient(config.embeddings, config.llm)
    try:
        return await reindex(
            store,
            client,
            partner_id,
            config.embeddings.batch_size,
            progress=lambda done: print(f"  {done} embedded", flush=True),
        )
    except EmbeddingsUnavailable as exc:
        raise CLIError(f"{exc}; what was embedded so far is kept, run reindex again") from exc
    finally:
        await client.close()
        await store.close()


def _hits_json(hits: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "id": hit.platform_message_id,
            "session": hit.session_title,
            "role": hit.role,
            "time": datetime.fromtimestamp(hit.created_at, UTC).isoformat(),
            "text": hit.text,
        }
        for hit in hits
    ]


IMPORT_ROLES = ("user", "assistant")


def parse_import_line(number: int, line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CLIError(f"line {number}: not JSON ({exc.msg})") from exc
    if not isinstance(record, dict):
        raise CLIError(f"line {number}: expected a JSON object")
    for key in ("session", "user", "role", "text", "time"):
        if key not in record or record[key] in (None, ""):
            raise CLIError(f"line {number}: missing '{key}'")
    if record["role"] not in IMPORT_ROLES:
        raise CLIError(f"line {number}: role must be user or assistant, not {record['role']!r}")
    record["time"] = _parse_time(number, record["time"])
    return record


def _parse_time(number: int, value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as exc:
        raise CLIError(f"line {number}: time {value!r} is not ISO 8601 or epoch seconds") from exc
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def cmd_import(config: Config, args: argparse.Namespace) -> int:
    partner = _catalog(config).require(args.partner)
    path = Path(args.file)
    if not path.is_file():
        raise CLIError(f"{path}: no such file")
    records = [
        parse_import_line(number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.strip()
    ]
    lock = _locked(config)
    try:
        added, skipped = asyncio.run(_import(config, partner, records))
    finally:
        lock.release()
    print(f"imported {added} messages into {partner.id} ({skipped} already there)")
    return 0


async def _import(
    config: Config, partner: Partner, records: list[dict[str, Any]]
) -> tuple[int, int]:
    store = await Store.open(config.data_dir / "gateway.db")
    partner_id = partner.id
    sessions: dict[str, str] = {}
    messages: list[NewMessage] = []
    try:
        # imported messages are stemmed in the partner's language, as the gateway would
        await store.set_search_language(partner_id, partner.preset.language)
        for record in records:
            user = str(record["user"])
            user_key = user if ":" in user else f"import:{user}"
            audience = f"user:{user_key}"
            chat_key = f"import:{partner_id}:{record['session']}"
            if chat_key not in sessions:
                sessions[chat_key] = await _import_session(store, partner_id, chat_key, record)
            ident = str(record.get("id") or f"{record['session']}:{len(messages)}")
            is_user = record["role"] == "user"
            messages.append(
                NewMessage(
                    chat_key=chat_key,
                    role=record["role"],
                    text=str(record["text"]),
                    audience=audience,
                    dedup_key=f"import:{partner_id}:{ident}",
                    session_id=sessions[chat_key],
                    partner_id=partner_id,
                    platform_message_id=ident,
                    user_key=user_key if is_user else None,
                    speaker=user if is_user else partner_id,
                    created_at=record["time"],
                )
            )
        ids = await store.add_messages(messages)
    finally:
        await store.close()
    added = sum(1 for i in ids if i is not None)
    return added, len(ids) - added


async def _import_session(
    store: Store, partner_id: str, chat_key: str, record: dict[str, Any]
) -> str:
    """The session an imported conversation goes into: the one an earlier import of the same
    file made, or a new, ended one titled by its first record."""
    earlier = await store.latest_session(chat_key, partner_id, kind="import")
    if earlier is not None:
        return earlier.id
    user = str(record["user"])
    user_key = user if ":" in user else f"import:{user}"
    session = await store.create_session(
        partner_id=partner_id,
        chat_key=chat_key,
        user_key=user_key,
        audience=f"user:{user_key}",
        system_prompt="",
        kind="import",
        title=str(record.get("title") or record["text"])[:60],
    )
    await store.end_session(session.id, "imported")
    return session.id


# ---- doctor and backup -----------------------------------------------------------------


def cmd_doctor(config: Config, args: argparse.Namespace) -> int:
    file = config_path(Path(args.config) if args.config else None)
    findings = asyncio.run(examine(config, file if file.exists() else None, token_checks(config)))
    for finding in findings:
        print(finding.line())
    return 1 if any(finding.ok is False for finding in findings) else 0


def token_checks(config: Config) -> dict[str, TokenChecker]:
    """A live check for each chat token that is set."""
    tokens = {"telegram": config.telegram.token, "discord": config.discord.token}
    return {
        platform: functools.partial(check, config)
        for platform, check in token_checkers().items()
        if tokens[platform] is not None
    }


def token_checkers() -> dict[str, Callable[[Config], Awaitable[TokenCheck]]]:
    """Each platform's token check; the adapters know their platforms (imported here, when a
    command needs them, so the other commands start without the chat SDKs)."""
    from adapters.discord_check import check_discord_token
    from adapters.telegram_check import check_telegram_token

    return {
        "telegram": lambda config: check_telegram_token(config.telegram),
        "discord": lambda config: check_discord_token(config.discord),
    }


def cmd_health(config: Config, args: argparse.Namespace) -> int:
    """Read the status file ``companion run`` keeps fresh; never asks the LLM provider."""
    del args
    health = check_health(config.data_dir)
    print(health.summary)
    return 0 if health.healthy else 1


def cmd_backup(config: Config, args: argparse.Namespace) -> int:
    target = asyncio.run(write_backup(config.data_dir, Path(args.file) if args.file else None))
    print(f"backup written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
