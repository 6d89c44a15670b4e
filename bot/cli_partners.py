"""``companion partners list|new|clone|delete``: partners from the terminal (their memory:
``bot/cli_memory.py``; imports and exports of cards: ``bot/cli_cards.py``)."""

from __future__ import annotations

import argparse
import sys

from bot import terminal
from bot.cli_data import CLIError, load_catalog, lock_data_dir
from bot.config import Config
from partners.persona import check_partner_id


def cmd_partners_list(config: Config, args: argparse.Namespace) -> int:
    del args
    catalog = load_catalog(config)
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
    lock = lock_data_dir(config)
    try:
        partner = load_catalog(config).create(args.id, name)
    finally:
        lock.release()
    print(f"created {partner.name} ({partner.id}) in {partner.dir}; edit its Markdown files")
    return 0


def cmd_partners_clone(config: Config, args: argparse.Namespace) -> int:
    lock = lock_data_dir(config)
    try:
        partner = load_catalog(config).clone(args.source, args.id)
    finally:
        lock.release()
    print(f"cloned {args.source} to {partner.id} (without journals or per-user memory)")
    return 0


def cmd_partners_delete(config: Config, args: argparse.Namespace) -> int:
    partner = load_catalog(config).require(args.id)
    if not args.yes:
        answer = terminal.confirm(
            f"Move {partner.name} ({partner.id}) and its memory to the trash?"
        )
        if answer is None:
            raise CLIError("nothing deleted; to delete without a question add --yes")
        if not answer:
            print("nothing deleted", file=sys.stderr)
            return 1
    lock = lock_data_dir(config)
    try:
        destination = load_catalog(config).delete(args.id)
    finally:
        lock.release()
    print(f"moved {args.id} to {destination}")
    return 0
