"""The ``companion`` command: run the gateway, chat in the terminal, and look after the data.

``run`` and ``chat`` write and take the data directory's lock; ``search``, ``memory show``,
``doctor``, ``backup`` and ``health`` only read and work beside a running gateway. Problems the
owner can fix (config, a busy data directory, no LLM) end with one clear message and exit
status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.base import Channel
from adapters.console_channel import CONSOLE_CHAT, ConsoleChannel
from bot.app import App, DataDirBusy, DataDirLock, build_app, owner_memory_file
from bot.backup import write_backup
from bot.config import Config, ConfigError, load_config
from bot.health import check_health
from bot.llm import configuration_problem, probe
from bot.store import NewMessage, Store, StoreError
from partners.catalog import PartnerCatalog
from partners.memory import read_text
from partners.persona import Partner, PartnerError
from partners.tools import format_hit, user_memory_file

logger = logging.getLogger("companion")

EXIT_PROBLEM = 2


class CLIError(Exception):
    """A problem the owner can fix; printed without a traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose if "verbose" in args else 0, quiet=args.command == "chat")
    try:
        config = load_config(Path(args.config) if args.config else None)
        return int(args.handler(config, args) or 0)
    except (ConfigError, CLIError, DataDirBusy, StoreError, PartnerError) as exc:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="companion", description=__doc__)
    parser.add_argument("--config", help="config file (default: $COMPANION_CONFIG or config.toml)")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the gateway on every configured channel")
    run.set_defaults(handler=cmd_run)

    chat = sub.add_parser("chat", help="talk to a partner in this terminal, as the owner")
    chat.add_argument("partner", nargs="?")
    chat.set_defaults(handler=cmd_chat)

    partners = sub.add_parser("partners", help="list, create, clone or delete partners")
    psub = partners.add_subparsers(dest="action", required=True)
    psub.add_parser("list").set_defaults(handler=cmd_partners_list)
    pnew = psub.add_parser("new")
    pnew.add_argument("id")
    pnew.add_argument("--name")
    pnew.set_defaults(handler=cmd_partners_new)
    pclone = psub.add_parser("clone")
    pclone.add_argument("source")
    pclone.add_argument("id")
    pclone.set_defaults(handler=cmd_partners_clone)
    pdel = psub.add_parser("delete")
    pdel.add_argument("id")
    pdel.set_defaults(handler=cmd_partners_delete)

    memory = sub.add_parser("memory", help="show a partner's memory")
    msub = memory.add_subparsers(dest="action", required=True)
    mshow = msub.add_parser("show")
    mshow.add_argument("partner")
    mshow.add_argument("--user", help="also show this user's file (platform:id)")
    mshow.set_defaults(handler=cmd_memory_show)

    search = sub.add_parser("search", help="search a partner's past conversations")
    search.add_argument("partner")
    search.add_argument("query", nargs="?", help="omit to read one query per line from stdin")
    search.add_argument("--user", help="only what this user may see (platform:id)")
    search.add_argument("--limit", type=int, default=30)
    search.add_argument("--json", action="store_true")
    search.set_defaults(handler=cmd_search)

    imp = sub.add_parser("import", help="import past conversations from a JSONL file")
    imp.add_argument("partner")
    imp.add_argument("file")
    imp.set_defaults(handler=cmd_import)

    sub.add_parser("doctor", help="check config, data and the LLM endpoint").set_defaults(
        handler=cmd_doctor
    )
    backup = sub.add_parser("backup", help="write a consistent archive of the data")
    backup.add_argument("file", nargs="?")
    backup.set_defaults(handler=cmd_backup)
    sub.add_parser(
        "health", help="exit 0 if a running gateway is alive and connected (for healthchecks)"
    ).set_defaults(handler=cmd_health)
    return parser


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


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    del args
    channels = platform_channels(config)
    if not channels:
        print(
            "No Telegram or Discord token is set: opening the console so you can talk to a "
            "partner here. (Add a token to config.toml to go online.)",
            file=sys.stderr,
        )
        return asyncio.run(console_session(config, None))
    return asyncio.run(serve(config, channels))


def cmd_chat(config: Config, args: argparse.Namespace) -> int:
    return asyncio.run(console_session(config, args.partner))


async def check_llm(config: Config, fatal: bool) -> None:
    problem = configuration_problem(config.llm) or await probe(config.llm)
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
    app = await build_app(config, channels)
    try:
        await app.start()
        logger.info("gateway running on %s", ", ".join(channels))
        await wait_for_stop(asyncio.Event())
    finally:
        logger.info("stopping")
        await app.stop()
    return 0


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
    lock = _locked(config)
    try:
        partner = _catalog(config).create(args.id, args.name)
    finally:
        lock.release()
    print(f"created {partner.id} in {partner.dir}; edit its Markdown files to shape it")
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


# ---- search and import -----------------------------------------------------------------


def cmd_search(config: Config, args: argparse.Namespace) -> int:
    partner = _catalog(config).require(args.partner)
    if not 1 <= args.limit <= 100:
        raise CLIError("--limit must be between 1 and 100")
    audiences = None if args.user is None else [f"user:{args.user}"]

    async def go() -> None:
        store = await Store.open(config.data_dir / "gateway.db")
        try:
            queries = [args.query] if args.query is not None else None
            if queries is None:
                for line in sys.stdin:
                    if line.strip():
                        hits = await store.search(partner.id, line.strip(), audiences, args.limit)
                        print(
                            json.dumps(
                                {"query": line.strip(), "results": _hits_json(hits)},
                                ensure_ascii=False,
                            ),
                            flush=True,
                        )
                return
            hits = await store.search(partner.id, args.query, audiences, args.limit)
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
            await store.close()

    asyncio.run(go())
    return 0


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
    del args
    problems = 0

    def line(ok: bool, text: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        print(f"{'ok ' if ok else 'BAD'} {text}")

    line(True, f"config: llm.base_url={config.llm.base_url} model={config.llm.model}")
    line(
        config.llm.api_key is not None or "api.openai.com" not in config.llm.base_url,
        f"llm.api_key: {'set (hidden)' if config.llm.api_key else 'not set'}",
    )
    for name, token in (("telegram", config.telegram.token), ("discord", config.discord.token)):
        print(f"    {name}.token: {'set (hidden)' if token else 'not set'}")
    data = config.data_dir
    try:
        data.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data):
            pass
        line(True, f"data dir {data.resolve()} is writable")
    except OSError as exc:
        line(False, f"data dir {data}: {exc}")
    catalog = _catalog(config)
    line(not catalog.errors, f"partners: {', '.join(p.id for p in catalog.all()) or 'none yet'}")
    for partner_id, error in catalog.errors.items():
        print(f"    {partner_id}: {error}")
    problem = configuration_problem(config.llm) or asyncio.run(probe(config.llm))
    line(problem is None, problem or f"LLM endpoint {config.llm.base_url} answers")
    return 1 if problems else 0


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
