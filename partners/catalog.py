"""The partner directories under ``data/partners``: list, load, create, clone and delete.

Deleting moves a partner to ``data/partners/.trash`` — conversations with someone are never
removed by a command. Cloning copies the persona and the partner's own memory, not its journals
or what it knows about individual users.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from importlib import resources
from pathlib import Path

from bot.store import Store
from partners.persona import (
    MAX_NAME_CHARS,
    Partner,
    PartnerError,
    check_partner_id,
    load_partner,
)
from partners.preset import change_preset, read_preset

logger = logging.getLogger(__name__)

EXAMPLE_PARTNER = "example"
TRASH = ".trash"
NOT_CLONED = ("memory", "users", "changelog")


def template_dir() -> Path:
    return Path(str(resources.files("partners") / "template" / EXAMPLE_PARTNER))


class PartnerCatalog:
    """Reads partners from disk on demand; :meth:`reload` re-reads every preset."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._partners: dict[str, Partner] = {}
        self.errors: dict[str, str] = {}

    def reload(self) -> None:
        partners: dict[str, Partner] = {}
        errors: dict[str, str] = {}
        if self.root.is_dir():
            for directory in sorted(self.root.iterdir()):
                if not directory.is_dir() or directory.name.startswith("."):
                    continue
                try:
                    partners[directory.name] = load_partner(directory)
                except PartnerError as exc:
                    errors[directory.name] = str(exc)
                    logger.warning("partner %s not loaded: %s", directory.name, exc)
        self._partners = partners
        self.errors = errors

    def all(self) -> list[Partner]:
        return sorted(self._partners.values(), key=lambda p: (p.preset.order, p.id))

    def public(self) -> list[Partner]:
        return [p for p in self.all() if p.preset.public]

    def get(self, partner_id: str) -> Partner | None:
        return self._partners.get(partner_id)

    def require(self, partner_id: str) -> Partner:
        check_partner_id(partner_id)
        partner = self._partners.get(partner_id)
        if partner is None:
            known = ", ".join(p.id for p in self.all()) or "none"
            raise PartnerError(f"no partner {partner_id!r}; partners: {known}")
        return partner

    def _target(self, partner_id: str) -> Path:
        check_partner_id(partner_id)
        target = self.root / partner_id
        if target.exists():
            raise PartnerError(f"a partner {partner_id!r} exists already; pick another id")
        return target

    def create(self, partner_id: str, name: str | None = None) -> Partner:
        """A partner from the template, named ``name`` (default: its id). The template is the
        example partner; its name is the one thing in it that is not a placeholder."""
        target = self._target(partner_id)
        if name is not None and len(name) > MAX_NAME_CHARS:
            raise PartnerError(f"name is {len(name)} characters; the limit is {MAX_NAME_CHARS}")
        if name is not None and not name.strip():
            raise PartnerError("a name cannot be empty")
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template_dir(), target)
        (target / "memory").mkdir(exist_ok=True)
        if name is not None or partner_id != EXAMPLE_PARTNER:
            rename_template(target, (name or partner_id).strip())
        self.reload()
        return self.require(partner_id)

    def clone(self, source_id: str, partner_id: str) -> Partner:
        source = self.require(source_id)
        target = self._target(partner_id)
        shutil.copytree(source.dir, target, ignore=shutil.ignore_patterns(*NOT_CLONED))
        (target / "memory").mkdir(exist_ok=True)
        self.reload()
        return self.require(partner_id)

    def delete(self, partner_id: str) -> Path:
        partner = self.require(partner_id)
        trash = self.root / TRASH
        trash.mkdir(parents=True, exist_ok=True)
        destination = trash / f"{partner_id}-{time.strftime('%Y%m%d-%H%M%S')}"
        shutil.move(str(partner.dir), destination)
        self.reload()
        return destination

    def ensure_example(self) -> Partner | None:
        """On first start with no partner, create the example so a chat can begin at once."""
        self.reload()
        if self._partners or self.errors:
            return None
        return self.create(EXAMPLE_PARTNER)


async def apply_search_languages(store: Store, catalog: PartnerCatalog) -> None:
    """Tell the store each partner's search language (preset.yml ``language:``); a partner
    whose language changed has its history re-indexed, which takes a moment on a long one."""
    for partner in catalog.all():
        count = await store.set_search_language(partner.id, partner.preset.language)
        if count:
            logger.info(
                "re-indexed %d messages of %s for %s", count, partner.id, partner.preset.language
            )


def rename_template(directory: Path, name: str) -> None:
    """Give a fresh copy of the template its own name: in preset.yml's ``name`` and wherever
    the template's name appears in its files (comments and persona text alike)."""
    preset = directory / "preset.yml"
    template_name = read_preset(preset, directory.name).name
    if template_name:
        pattern = re.compile(rf"\b{re.escape(template_name)}\b")
        for path in directory.iterdir():
            if path.is_file() and path.suffix in (".yml", ".md"):
                text = path.read_text(encoding="utf-8")
                path.write_text(pattern.sub(lambda _: name, text), encoding="utf-8", newline="")
    set_preset_value(preset, "name", name)


def set_preset_value(path: Path, key: str, value: str | bool) -> None:
    """Change one top-level key of preset.yml, checked, keeping every other byte of the file
    (``partners/preset.py``)."""
    change_preset(path, (key,), value)
