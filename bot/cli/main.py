"""The ``companion`` command: set up, run the gateway, chat in the terminal, look after the data.

``setup`` writes config.toml (``bot/cli/setup_wizard.py``). ``run``, ``chat``, ``import``,
``reindex`` and ``database copy`` take the data directory's lock; ``search``, ``memory``,
``pairing``, ``doctor``, ``backup`` and ``health`` work beside a running gateway (``pairing``
writes its decisions to the shared database, ``memory edit`` saves only onto the version it
copied).
Problems the owner can fix (config, a busy data directory, no LLM) end with one clear message
and exit status 2.

This module is the argument parser and its dispatch; each group of subcommands lives in
``bot/cli/<group>.py`` (run, partners, memory, cards, pairing, history, upkeep, database),
named here as ``module:function`` and imported only when that subcommand runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

EXIT_PROBLEM = 2
PROBLEMS = (
    ("bot.config.model", "ConfigError"),
    ("bot.cli.data", "CLIError"),
    ("bot.cli.cards", "CardCommandError"),
    ("bot.app", "DataDirBusy"),
    ("bot.store.errors", "StoreError"),
    ("partners.persona", "PartnerError"),
    ("bot.cli.setup_wizard", "SetupError"),
)
"""Errors the owner can fix, where each is defined. A subcommand's modules are imported only
when it runs (``companion --help`` loads no backend, model client or web page), and an error
can only be one of these if its module was loaded, so none is imported just to be caught."""

PLATFORM_TOKENS = ("telegram.token", "telegram.bots", "discord.token")
WITHOUT_THE_MODEL = (*PLATFORM_TOKENS, "llm.api_key")
UNNEEDED_SECRETS = {
    "chat": PLATFORM_TOKENS,
    **dict.fromkeys(("search", "import", "reindex"), WITHOUT_THE_MODEL),
    **dict.fromkeys(
        ("pairing", "memory", "partners", "lore", "backup", "health", "database"),
        (*WITHOUT_THE_MODEL, "embeddings.api_key"),
    ),
}
"""Secrets a command does not use: kept in a variable this shell has not exported (the bot
token in the gateway's shell alone), they do not stop it."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose if "verbose" in args else 0, quiet=args.command == "chat")
    try:
        if args.command == "setup":  # writes the config: it may not exist or load yet
            return int(handler(args.handler)(args) or 0)
        from bot.config.model import load_config

        unneeded = UNNEEDED_SECRETS.get(args.command, ())
        config = load_config(Path(args.config) if args.config else None, unneeded=unneeded)
        return int(handler(args.handler)(config, args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if not isinstance(exc, problems()):
            raise
        print(f"companion: {exc}", file=sys.stderr)
        return EXIT_PROBLEM


def handler(name: str) -> Callable[..., Any]:
    """The function a subcommand names as ``module:function``, its module imported now."""
    module, function = name.split(":")
    return cast(Callable[..., Any], getattr(importlib.import_module(module), function))


def problems() -> tuple[type[Exception], ...]:
    """The owner-fixable error types among the modules loaded so far (see PROBLEMS)."""
    return tuple(
        getattr(sys.modules[module], name) for module, name in PROBLEMS if module in sys.modules
    )


def setup_logging(verbose: int, quiet: bool) -> None:
    import logging  # here: ``--help`` and ``--version`` end before it is needed

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
FILE is detected as one of (or say which with --format):
  jsonl        this project's format, one JSON object per line:
                 session  any text that groups lines into one conversation (required)
                 user     who spoke with the partner: "telegram:123", "discord:456" or a name
                 role     "user" or "assistant" (required)
                 text     what was said (required)
                 time     when (required; forms below)
                 title    the conversation's title (optional; default: its first text)
                 id       a stable id for the line, returned by `search --json` (optional)
               {"session": "s1", "user": "telegram:5", "role": "user", \
"text": "We fly to Tokyo next week", "time": "2026-01-02T10:00:00Z", "id": "old-1"}
  sillytavern  a SillyTavern chat file (.jsonl): your lines are the user's (named by the
               file, or --as-user), the characters' the partner's; the chosen swipe of each
  telegram     Telegram Desktop's result.json: one chat, or --chat NAME of a whole export;
               --as-user NAME says which sender is the user (a whole export knows)
  chatgpt      ChatGPT's conversations.json: the branch each conversation shows, as the
               owner's (or --as-user NAME's)
--as-user owner makes the history the owner's (recalled in the owner's chats).
Times: epoch seconds or milliseconds, ISO 8601 (no zone: UTC) or "June 5, 2024 3:04pm".
Importing the same file twice adds nothing.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="companion",
        description="AI companions with private long-term memory on Telegram, Discord and "
        "this terminal. New here? Start with `companion setup`.",
    )
    parser.add_argument("--version", action=VersionAction, help="show the version and exit")
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
    run.set_defaults(handler="bot.cli.run:cmd_run")

    chat = sub.add_parser("chat", help="talk to a partner in this terminal, as the owner")
    chat.add_argument(
        "partner", nargs="?", help="partner id (default: [partners] default, else the first)"
    )
    chat.set_defaults(handler="bot.cli.run:cmd_chat")

    add_partner_commands(sub)

    pairing = sub.add_parser("pairing", help="decide pairing requests from this terminal")
    pairsub = pairing.add_subparsers(
        dest="action", required=True, metavar="ACTION", help="list, approve or deny"
    )
    pairsub.add_parser("list", help="the requests waiting, with their codes").set_defaults(
        handler="bot.cli.pairing:cmd_pairing_list"
    )
    papprove = pairsub.add_parser("approve", help="let a user in (they are told at once)")
    papprove.add_argument("code", help="the code the user was given (case does not matter)")
    papprove.set_defaults(handler="bot.cli.pairing:cmd_pairing_approve")
    pdeny = pairsub.add_parser("deny", help="refuse a request")
    pdeny.add_argument("code", help="the code the user was given (case does not matter)")
    pdeny.set_defaults(handler="bot.cli.pairing:cmd_pairing_deny")

    memory = sub.add_parser("memory", help="show, export or edit a partner's memory")
    msub = memory.add_subparsers(
        dest="action", required=True, metavar="ACTION", help="show | export | edit"
    )
    mshow = msub.add_parser("show", help="the owner's shared memory and the partner's own")
    mshow.add_argument("partner", help="partner id")
    mshow.add_argument("--user", metavar="PLATFORM:ID", help="also show this user's file")
    mshow.set_defaults(handler="bot.cli.memory:cmd_memory_show")
    mexport = msub.add_parser("export", help="write a partner's documents as Markdown files")
    mexport.add_argument("partner", help="partner id")
    mexport.add_argument("dir", help="the folder to write them to (created if missing)")
    mexport.set_defaults(handler="bot.cli.memory:cmd_memory_export")
    medit = msub.add_parser(
        "edit", help="edit one document in $EDITOR; saved only if nothing wrote it meanwhile"
    )
    medit.add_argument("partner", help="partner id")
    medit.add_argument("file", help="the document, as export names it: MEMORY.md, users/…")
    medit.set_defaults(handler="bot.cli.memory:cmd_memory_edit")

    search = sub.add_parser("search", help="search a partner's past conversations")
    search.add_argument("partner", help="partner id")
    search.add_argument("query", nargs="?", help="omit to read one query per line from stdin")
    search.add_argument("--user", metavar="PLATFORM:ID", help="only what this user may see")
    search.add_argument("--limit", type=int, default=30, help="most hits to show (1-100)")
    search.add_argument("--json", action="store_true", help="print JSON instead of text")
    search.set_defaults(handler="bot.cli.history:cmd_search")

    reindex = sub.add_parser(
        "reindex",
        help="embed past messages for semantic recall (after [embeddings] is set or its model"
        " changed)",
    )
    reindex.add_argument("partner", nargs="?", help="partner id (default: every partner)")
    reindex.set_defaults(handler="bot.cli.reindex:cmd_reindex")

    imp = sub.add_parser(
        "import",
        help="import past conversations (this project's JSONL, SillyTavern, Telegram, ChatGPT)",
        epilog=IMPORT_FORMAT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    imp.add_argument("partner", help="partner id the conversations were with")
    imp.add_argument("file", help="the history file (formats below)")
    imp.add_argument(
        "--format",
        choices=("jsonl", "sillytavern", "telegram", "chatgpt"),
        help="the file's format (default: detected)",
    )
    imp.add_argument("--as-user", metavar="NAME", help="who in the file is the user")
    imp.add_argument("--chat", metavar="NAME", help="which chat of a whole Telegram export")
    imp.set_defaults(handler="bot.cli.history:cmd_import")

    add_database_command(sub)

    sub.add_parser(
        "doctor", help="check config, data, partners, the LLM endpoint and chat tokens"
    ).set_defaults(handler="bot.cli.upkeep:cmd_doctor")
    backup = sub.add_parser("backup", help="write a consistent archive of the data")
    backup.add_argument("file", nargs="?", help="the .tar.gz to write (default: in data/backups)")
    backup.set_defaults(handler="bot.cli.upkeep:cmd_backup")
    sub.add_parser(
        "health", help="exit 0 if a running gateway is alive and connected (for healthchecks)"
    ).set_defaults(handler="bot.cli.upkeep:cmd_health")
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
    setup.add_argument(
        "--telegram-base-url",
        metavar="URL",
        help="telegram.base_url: a self-hosted Bot API server (default: Telegram's own)",
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
    setup.set_defaults(handler="bot.cli.upkeep:cmd_setup")


def add_database_command(sub: Any) -> None:
    database = sub.add_parser("database", help="move a SQLite gateway onto PostgreSQL")
    dsub = database.add_subparsers(dest="action", required=True, metavar="ACTION", help="copy")
    dcopy = dsub.add_parser(
        "copy",
        help="copy data/gateway.db (and memory files) into an empty PostgreSQL database",
        description="Copies every conversation, memory and setting of the SQLite database into"
        " an empty PostgreSQL database in one transaction (a failure leaves it empty) and"
        " checks the row counts. The SQLite file is never changed. Stop the gateway first.",
    )
    dcopy.add_argument(
        "--to",
        metavar="URL",
        help="postgresql://user:password@host/name (default: [storage] database_url)",
    )
    dcopy.set_defaults(handler="bot.cli.database:cmd_database_copy")


def add_partner_commands(sub: Any) -> None:
    partners = sub.add_parser(
        "partners", help="list, create, clone, delete, import or export partners"
    )
    psub = partners.add_subparsers(
        dest="action",
        required=True,
        metavar="ACTION",
        help="list, new, clone, delete, edit, import (a character card) or export (as one)",
    )
    psub.add_parser("list", help="every partner, and those that did not load").set_defaults(
        handler="bot.cli.partners:cmd_partners_list"
    )
    pnew = psub.add_parser("new", help="create a partner from the template")
    pnew.add_argument("id", help="its id: a-z, 0-9, - and _, up to 32 characters")
    pnew.add_argument("--name", help="the name it goes by (asked if not given)")
    pnew.set_defaults(handler="bot.cli.partners:cmd_partners_new")
    pclone = psub.add_parser("clone", help="copy a partner without journals or user memory")
    pclone.add_argument("source", help="id of the partner to copy")
    pclone.add_argument("id", help="id of the new partner")
    pclone.set_defaults(handler="bot.cli.partners:cmd_partners_clone")
    pdel = psub.add_parser("delete", help="move a partner to data/partners/.trash")
    pdel.add_argument("id", help="id of the partner to delete")
    pdel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    pdel.set_defaults(handler="bot.cli.partners:cmd_partners_delete")
    pedit = psub.add_parser(
        "edit", help="edit preset.yml, card.json or lorebook.json in $EDITOR (checked first)"
    )
    pedit.add_argument("id", help="id of the partner")
    pedit.add_argument("file", help="preset.yml, card.json or lorebook.json")
    pedit.set_defaults(handler="bot.cli.partners:cmd_partners_edit")
    add_card_commands(psub, sub)


def add_card_commands(partner_actions: Any, sub: Any) -> None:
    """``partners import``/``partners export`` under ``partners``, and ``lore import``."""
    pimport = partner_actions.add_parser(
        "import", help="make a partner from a character card (PNG, JSON, CHARX, YAML)"
    )
    pimport.add_argument(
        "file",
        help="the card: a PNG or JSON card (V1-V3), a CHARX zip or RisuAI JPEG, a Pygmalion "
        "JSON or an oobabooga YAML character",
    )
    pimport.add_argument("--id", help="the new partner's id (default: from the card's name)")
    pimport.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    pimport.set_defaults(handler="bot.cli.cards:cmd_partners_import")
    pexport = partner_actions.add_parser(
        "export", help="write a partner as a V3 character card (memory is never included)"
    )
    pexport.add_argument("id", help="id of the partner to export")
    pexport.add_argument(
        "--card", required=True, metavar="OUT", help="where to write it: a .png or a .json file"
    )
    pexport.set_defaults(handler="bot.cli.cards:cmd_partners_export")
    lore = sub.add_parser("lore", help="lorebooks (world info) attached to partners")
    lsub = lore.add_subparsers(dest="action", required=True, metavar="ACTION", help="import")
    limport = lsub.add_parser(
        "import", help="add a lorebook's entries to a partner's lorebook.json"
    )
    limport.add_argument(
        "file", help="SillyTavern world-info JSON, a character_book, or a card carrying one"
    )
    limport.add_argument("partner", help="id of the partner it belongs to")
    limport.set_defaults(handler="bot.cli.cards:cmd_lore_import")


class VersionAction(argparse.Action):
    """``--version``: the installed package's metadata is read only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        del args
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def package_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("companion-gateway")
    except metadata.PackageNotFoundError:
        return "unknown (not installed; run make)"


if __name__ == "__main__":
    sys.exit(main())
