"""``companion partners list|new|clone|delete|edit``: partners from the terminal (their memory:
``bot/cli/memory.py``; imports and exports of cards: ``bot/cli/cards.py``), wherever the
gateway keeps them: directories under the data directory (written under its lock), or rows
of the database every worker shares (each worker sees the change within a heartbeat)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bot.cli import terminal
from bot.cli.data import CLIError, load_catalog, lock_data_dir, with_catalog
from bot.cli.invocation import program
from bot.cli.memory import edit_in_editor, keep_beside
from bot.config.model import Config
from bot.gateway.memory_documents import rows_configured
from bot.store import Store
from partners.card_format import CardError
from partners.cards import PRIVATE_NOTE
from partners.catalog import EDITABLE_OWN_FILES, PartnerCatalog, check_own_file
from partners.persona import Partner, PartnerError, check_partner_id

EDIT_ROWS_HINT = "edit its Markdown files with `{program} memory edit {id} SOUL.md`"


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
        raise CLIError(
            f"a new partner needs a name: {program()} partners new {args.id} --name NAME"
        )
    if rows_configured(config):

        async def new(catalog: PartnerCatalog, _: Store | None) -> Partner:
            return await catalog.new(args.id, name)

        partner = with_catalog(config, new)
        print(f"created {partner.name} ({partner.id}) in the database; " + _hint(partner))
        print(PRIVATE_NOTE.format(id=partner.id))
        return 0
    lock = lock_data_dir(config)
    try:
        partner = load_catalog(config).create(args.id, name)
    finally:
        lock.release()
    print(f"created {partner.name} ({partner.id}) in {partner.dir}; edit its Markdown files")
    print(PRIVATE_NOTE.format(id=partner.id))
    return 0


def _hint(partner: Partner) -> str:
    return EDIT_ROWS_HINT.format(program=program(), id=partner.id)


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


def cmd_partners_edit(config: Config, args: argparse.Namespace) -> int:
    """One of a partner's own text files (preset.yml, card.json, lorebook.json) in $EDITOR,
    checked, and saved only onto the bytes it was opened with."""
    name = args.file
    if name not in EDITABLE_OWN_FILES:
        own = ", ".join(EDITABLE_OWN_FILES)
        raise CLIError(
            f"{name!r} is not one of the partner's own text files ({own}); its Markdown "
            f"files: {program()} memory edit {args.id} {name}"
        )
    before = load_catalog(config).require(args.id).file(name) or b""
    edited = edit_in_editor(before, name)
    if edited == before:
        print(f"{name} is unchanged: nothing saved")
        return 0

    def replaced(current: bytes | None) -> bytes:
        if (current or b"") != before:
            kept = keep_beside(Path(tempfile.mkdtemp(prefix="companion-edit-")), name, edited)
            raise CLIError(
                f"{name} changed while you edited it; nothing was overwritten. Your text is in "
                f"{kept}: run the edit again and merge it"
            )
        try:
            check_own_file(args.id, name, edited)
        except (PartnerError, CardError) as exc:
            kept = keep_beside(Path(tempfile.mkdtemp(prefix="companion-edit-")), name, edited)
            raise CLIError(f"not saved: {exc}. Your text is in {kept}") from None
        return edited

    async def save(catalog: PartnerCatalog, _: Store | None) -> Partner | None:
        return await catalog.change_file(args.id, name, replaced)

    if rows_configured(config):
        with_catalog(config, save)
    else:
        lock = lock_data_dir(config)
        try:
            with_catalog(config, save)
        finally:
            lock.release()
    print(f"saved {name} of {args.id}; new conversations use it")
    return 0
