"""Partners as directories under ``data/partners`` (the files backend; blocking calls).

A partner is a directory holding a preset.yml; the directory is the truth, and the owner may
edit it by hand. Here: reading every directory, making one from the template or as a clone,
writing one whole from its files, changing one file in it, and moving one to
``data/partners/.trash`` (nothing is ever removed). :class:`partners.catalog.PartnerCatalog`
holds what was read; with the database as the truth, :mod:`partners.partner_rows` does this.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from partners.documents import write_atomic
from partners.partner_template import EXAMPLE_PARTNER, checked_name, rename_template, template_dir
from partners.persona import Partner, PartnerError, check_partner_id, load_partner

logger = logging.getLogger(__name__)

TRASH = ".trash"
NOT_CLONED = ("memory", "users", "changelog")
"""A clone's persona and own memory are copied; its journals and what it knows of each user
are not."""


def load_directories(root: Path) -> tuple[dict[str, Partner], dict[str, str]]:
    """Every partner directory under ``root``: the partners that load, and why the others
    did not (by id)."""
    partners: dict[str, Partner] = {}
    errors: dict[str, str] = {}
    if root.is_dir():
        for directory in sorted(root.iterdir()):
            if not directory.is_dir() or directory.name.startswith("."):
                continue
            try:
                partners[directory.name] = load_partner(directory)
            except PartnerError as exc:
                errors[directory.name] = str(exc)
                logger.warning("partner %s not loaded: %s", directory.name, exc)
    return partners, errors


def new_directory(root: Path, partner_id: str) -> Path:
    """Where a new partner goes; PartnerError if the id is not valid or already taken."""
    check_partner_id(partner_id)
    target = root / partner_id
    if target.exists():
        raise PartnerError(f"a partner {partner_id!r} exists already; pick another id")
    return target


def create_directory(root: Path, partner_id: str, name: str | None) -> None:
    """A partner directory from the template, named ``name`` (default: its id)."""
    target = new_directory(root, partner_id)
    checked = checked_name(name)
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template_dir(), target)
    (target / "memory").mkdir(exist_ok=True)
    if checked is not None or partner_id != EXAMPLE_PARTNER:
        rename_template(target, checked or partner_id)


def clone_directory(source: Path, root: Path, partner_id: str) -> None:
    """A copy of the partner directory ``source`` under a new id, without :data:`NOT_CLONED`."""
    target = new_directory(root, partner_id)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*NOT_CLONED))
    (target / "memory").mkdir(exist_ok=True)


def trash_directory(root: Path, directory: Path, partner_id: str) -> Path:
    """Move a partner directory to the trash, stamped with the time; where it went."""
    trash = root / TRASH
    trash.mkdir(parents=True, exist_ok=True)
    destination = trash / f"{partner_id}-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.move(str(directory), destination)
    return destination


def write_directory(root: Path, partner_id: str, files: Mapping[str, bytes]) -> Path:
    """A new partner directory holding ``files`` (names inside it), with an empty journal
    folder: written into a scratch directory renamed into place, so a failure leaves nothing
    behind."""
    root.mkdir(parents=True, exist_ok=True)
    target = root / partner_id
    if target.exists():
        raise PartnerError(f"a partner {partner_id!r} exists already; choose another id")
    scratch = Path(tempfile.mkdtemp(dir=root, prefix=".import-"))
    try:
        for name, body in files.items():
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            (scratch / name).write_bytes(body)
        (scratch / "memory").mkdir(exist_ok=True)
        os.rename(scratch, target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return target


def change_file(path: Path, edit: Callable[[bytes | None], bytes]) -> None:
    """Replace one file of a partner by ``edit`` of its bytes (None: it does not exist yet)."""
    try:
        current: bytes | None = path.read_bytes()
    except FileNotFoundError:
        current = None
    write_atomic(path, edit(current))
