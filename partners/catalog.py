"""Which partners exist, loaded into memory: list and find them; create, clone, import, change
and delete them.

Where partners live follows where memory documents do (``[storage] documents``,
:mod:`bot.gateway.memory_documents`):

- **Files** (SQLite, the default; ``make run`` needs nothing else): a partner is a directory
  under ``data/partners`` holding a preset.yml. The directory is the truth: the owner may edit
  it by hand, and ``/admin reload`` reads it again. Deleting moves the directory to
  ``data/partners/.trash``.
- **Rows** (PostgreSQL, where workers share nothing but the database): the database is the only
  truth (docs/architecture.md "Several workers"). Every file of a partner is a row of the
  ``documents`` table in the namespace ``partners/<id>``: preset.yml, card.json, lorebook.json
  and avatar.png (bytes as they came) beside its Markdown persona and memory documents; the
  partners are the namespaces holding a preset.yml row (:mod:`partners.partner_rows`). No
  worker keeps partners on disk: a partner's own files are held in memory as it was loaded
  (:attr:`partners.persona.Partner.stored`), its Markdown files are read through the memory
  store at each use. Every write (create, clone, card import, ``/admin partner set``,
  ``companion lore import``, delete) goes to the database under the partner's lock, naming
  the versions it read, and then counts a new catalog version (the row
  ``partners``/``.catalog``). Each worker compares that version on every heartbeat
  (``workers.heartbeat_seconds``) and loads again when it changed, reading only the files
  whose version changed; and a worker asked about a partner it does not know (a message for
  the partner a user chose, a turn, a command) compares it at once before it concludes there
  is none. So another worker sees a new partner within one heartbeat, and none ever answers
  as another partner because it had not heard of the new one yet. Deleting moves every row
  of the partner into the namespace ``partners/.trash/<id>-<time>``, nothing is removed.
  Partner directories found on a worker's disk are read into the database once per partner
  (``companion database copy`` or the first start), never again.

Reading and writing the directories is :mod:`partners.partner_directories`; a new partner's
files come from :mod:`partners.partner_template`.

Deleting never removes anything (conversations with someone are never removed by a command).
Cloning copies the persona and the partner's own memory, not its journals or what it knows
about individual users.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from bot.store import Store
from partners.card_format import MAX_CARD_JSON_BYTES, parse_json
from partners.lore_books import parse_book
from partners.partner_directories import (
    change_file,
    clone_directory,
    create_directory,
    load_directories,
    trash_directory,
    write_directory,
)
from partners.partner_rows import Edit, PartnerRows
from partners.partner_template import EXAMPLE_PARTNER, checked_name, renamed, template_files
from partners.persona import (
    CARD_FILE,
    LOREBOOK_FILE,
    PRESET_FILE,
    Partner,
    PartnerError,
    check_partner_id,
    stored_partner,
)
from partners.preset import parse_preset

logger = logging.getLogger(__name__)


class PartnerCatalog:
    """The partners as last loaded, from their directories or from the database (``rows``).

    Reading (:meth:`all`, :meth:`get`, ...) never touches the disk or the database. The
    blocking methods (:meth:`reload`, :meth:`create`, ...) work on directories only; the
    ``async`` ones work on either."""

    def __init__(
        self,
        root: Path,
        rows: PartnerRows | None = None,
        on_loaded: Callable[[PartnerCatalog], Awaitable[None]] | None = None,
    ) -> None:
        self.root = root
        self.rows = rows
        self.on_loaded = on_loaded
        """Called after each load of rows (a new language to index, the version to publish)."""
        self._partners: dict[str, Partner] = {}
        self.errors: dict[str, str] = {}
        self.version = 0
        """The catalog version loaded (rows; with files always 0)."""
        self._loaded = False
        self._loading = asyncio.Lock()

    # ---- reading -----------------------------------------------------------------------

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

    def describe(self) -> str:
        """How many partners this process knows, and from where: ``3 (catalog version 12)``."""
        if self.rows is None:
            return f"{len(self._partners)} (directories in {self.root})"
        return catalog_line(len(self._partners), self.version)

    # ---- either backend ------------------------------------------------------------------

    async def refresh(self) -> bool:
        """With rows: load again if the catalog's version changed (True: it did, or nothing
        was loaded yet). With files: nothing (``/admin reload`` reads them: :meth:`reread`)."""
        if self.rows is None:
            return False
        async with self._loading:
            version = await self.rows.version()
            if self._loaded and version == self.version:
                return False
            await self._load_rows(version)
            return True

    async def reread(self) -> None:
        """Read every partner again (``/admin reload``)."""
        if self.rows is None:
            await asyncio.to_thread(self.reload)
            return
        async with self._loading:
            await self._load_rows(await self.rows.version())

    async def find(self, partner_id: str) -> Partner | None:
        """The partner, after checking the catalog's version when this process does not
        know it (another worker may have made it a moment ago)."""
        if partner_id not in self._partners:
            await self.refresh()
        return self._partners.get(partner_id)

    async def new(self, partner_id: str, name: str | None = None) -> Partner:
        """A partner from the template, named ``name`` (default: its id)."""
        if self.rows is None:
            return await asyncio.to_thread(self.create, partner_id, name)
        check_partner_id(partner_id)
        checked = checked_name(name)
        files = await asyncio.to_thread(template_files)
        if checked is not None or partner_id != EXAMPLE_PARTNER:
            files = renamed(files, checked or partner_id, partner_id)
        return await self.add(partner_id, files)

    async def copy(self, source_id: str, partner_id: str) -> Partner:
        """A clone of ``source_id`` (persona and own memory; no journals, no per-user
        memory)."""
        if self.rows is None:
            return await asyncio.to_thread(self.clone, source_id, partner_id)
        source = self.require(source_id)
        check_partner_id(partner_id)
        return await self.add(partner_id, await self.rows.root_files(source.id))

    async def add(self, partner_id: str, files: Mapping[str, bytes]) -> Partner:
        """A new partner from all its files by name (its own files and its Markdown ones);
        refused if a partner of that id exists. Written whole or not at all."""
        check_partner_id(partner_id)
        if self.rows is None:
            await asyncio.to_thread(write_directory, self.root, partner_id, files)
            await asyncio.to_thread(self.reload)
        else:
            await self.rows.add(partner_id, files)
            await self.reread()
        return self.require(partner_id)

    async def change_file(self, partner_id: str, name: str, edit: Edit) -> Partner | None:
        """Replace one of the partner's own files (preset.yml, lorebook.json, ...) by
        ``edit`` of its current bytes; ``edit`` may raise to refuse (nothing is written).
        The partner as loaded again (None: it no longer loads; :attr:`errors` says why)."""
        partner = self.require(partner_id)
        if self.rows is None:
            await asyncio.to_thread(change_file, partner.dir / name, edit)
            await asyncio.to_thread(self.reload)
        else:
            await self.rows.change(partner.id, name, edit)
            await self.reread()
        return self.get(partner.id)

    async def trash(self, partner_id: str) -> str:
        """Move the partner and everything it keeps to the trash; where it went."""
        if self.rows is None:
            return str(await asyncio.to_thread(self.delete, partner_id))
        partner = self.require(partner_id)
        destination = await self.rows.trash(partner.id)
        await self.reread()
        return destination

    async def ensure_first(self) -> Partner | None:
        """With no partner at all, the example, so that a chat can begin at once."""
        if self.rows is None:
            return await asyncio.to_thread(self.ensure_example)
        await self.refresh()
        if self._partners or self.errors:
            return None
        try:
            return await self.new(EXAMPLE_PARTNER)
        except PartnerError:  # another worker starting at the same moment made it
            await self.refresh()
            return None

    async def _load_rows(self, version: int) -> None:
        assert self.rows is not None
        partners: dict[str, Partner] = {}
        errors: dict[str, str] = {}
        for partner_id, files in sorted((await self.rows.load()).items()):
            try:
                partners[partner_id] = stored_partner(self.root / partner_id, files)
            except PartnerError as exc:
                errors[partner_id] = str(exc)
                logger.warning("partner %s not loaded: %s", partner_id, exc)
        self._partners, self.errors = partners, errors
        self.version, self._loaded = version, True
        if self.on_loaded is not None:
            await self.on_loaded(self)

    # ---- directories (files are the truth; blocking) -------------------------------------

    def _files_only(self) -> None:
        if self.rows is not None:
            raise RuntimeError("partners are rows of the database here, not directories")

    def reload(self) -> None:
        self._files_only()
        self._partners, self.errors = load_directories(self.root)

    def create(self, partner_id: str, name: str | None = None) -> Partner:
        """A partner from the template, named ``name`` (default: its id)."""
        self._files_only()
        create_directory(self.root, partner_id, name)
        self.reload()
        return self.require(partner_id)

    def clone(self, source_id: str, partner_id: str) -> Partner:
        self._files_only()
        source = self.require(source_id)
        clone_directory(source.dir, self.root, partner_id)
        self.reload()
        return self.require(partner_id)

    def delete(self, partner_id: str) -> Path:
        self._files_only()
        partner = self.require(partner_id)
        destination = trash_directory(self.root, partner.dir, partner_id)
        self.reload()
        return destination

    def ensure_example(self) -> Partner | None:
        """On first start with no partner, create the example so a chat can begin at once."""
        self.reload()
        if self._partners or self.errors:
            return None
        return self.create(EXAMPLE_PARTNER)


EDITABLE_OWN_FILES = (PRESET_FILE, CARD_FILE, LOREBOOK_FILE)
"""A partner's own files that are text (the avatar is a picture)."""


def check_own_file(partner_id: str, name: str, data: bytes) -> None:
    """:class:`PartnerError` (or :class:`partners.card_format.CardError`) naming what is wrong
    when ``data`` would not load as the partner's ``name``: written that way, the partner
    would stop loading (preset.yml), lose its greetings or its lorebook."""
    where = f"{partner_id}'s {name}"
    if name == PRESET_FILE:
        parse_preset(data, where, partner_id)
    elif name == CARD_FILE:
        if not isinstance(parse_json(data, where, MAX_CARD_JSON_BYTES, "fix it"), dict):
            raise PartnerError(f"{where}: should be a JSON object; fix it")
    elif name == LOREBOOK_FILE:
        parse_book(data, where)
    else:
        raise PartnerError(f"{name!r} is not a text file of the partner: {EDITABLE_OWN_FILES}")


def catalog_line(count: int, version: int) -> str:
    """A catalog of rows as status and doctor show it, for one worker."""
    return f"{count} (catalog version {version})"


async def apply_search_languages(store: Store, catalog: PartnerCatalog) -> None:
    """Tell the store each partner's search language (preset.yml ``language:``); a partner
    whose language changed has its history re-indexed, which takes a moment on a long one."""
    for partner in catalog.all():
        count = await store.set_search_language(partner.id, partner.preset.language)
        if count:
            logger.info(
                "re-indexed %d messages of %s for %s", count, partner.id, partner.preset.language
            )
