"""``companion partners list|new|clone|delete``: partners from the terminal (their memory:
``bot/cli_memory.py``; imports and exports of cards: ``bot/cli_cards.py``), wherever the
gateway keeps them: directories under the data directory (written under its lock), or rows
of the database every worker shares (each worker sees the change within a heartbeat)."""

from __future__ import annotations

import argparse
import sys

from bot import terminal
from bot.cli_data import CLIError, load_catalog, lock_data_dir, with_catalog
from bot.config import Config
from bot.memory_documents import rows_configured
from bot.store import Store
from partners.catalog import PartnerCatalog
from partners.persona import Partner, check_partner_id

EDIT_ROWS_HINT = "edit its Markdown files with `companion memory edit {id} SOUL.md`"


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
    if rows_configured(config):

        async def new(catalog: PartnerCatalog, _: Store | None) -> Partner:
            return await catalog.new(args.id, name)

        partner = with_catalog(config, new)
        print(f"created {partner.name} ({partner.id}) in the database; " + _hint(partner))
        return 0
    lock = lock_data_dir(config)
    try:
        partner = load_catalog(config).create(args.id, name)
    finally:
        lock.release()
    print(f"created {partner.name} ({partner.id}) in {partner.dir}; edit its Markdown files")
    return 0


def _hint(partner: Partner) -> str:
    return EDIT_ROWS_HINT.format(id=partner.id)


def cmd_partners_clone(config: Config, args: argparse.Namespace) -> int:
    if rows_configured(config):

        async def clone(catalog: PartnerCatalog, _: Store | None) -> Partner:
            return await catalog.copy(args.source, args.id)

        with_catalog(config, clone)
        print(f"cloned {args.source} to {args.id} (without journals or per-user memory)")
        return 0
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
    print(f"moved {args.id} to {_delete(config, args.id)}")
    return 0


def _delete(config: Config, partner_id: str) -> str:
    """Move the partner to the trash; where it went."""
    if rows_configured(config):

        async def trash(catalog: PartnerCatalog, _: Store | None) -> str:
            return await catalog.trash(partner_id)

        return f"{with_catalog(config, trash)} (in the database)"
    lock = lock_data_dir(config)
    try:
        return str(load_catalog(config).delete(partner_id))
    finally:
        lock.release()
