"""Character cards in and out of a partner directory (docs/cards.md).

A card is read whatever shape it came in (``partners/card_files.py``: PNG, JSON, CHARX,
Pygmalion, oobabooga). Its fields land in the files the owner already edits: ``system_prompt``
in SYSTEM.md, ``personality`` in SOUL.md, ``description`` in IDENTITY.md, ``scenario`` in
SCENARIO.md, ``mes_example`` in EXAMPLES.md, ``post_history_instructions`` in POST_HISTORY.md
(sent after the history each turn, as front-ends do). The greetings, ``creator_notes`` (never
sent to the model), tags, creator, version, extensions and every other field are kept verbatim
in ``card.json``, so an export loses nothing; the lorebook becomes ``lorebook.json``, the image
``avatar.png`` and a CHARX card's other assets files under ``assets/``. ``{{char}}`` (and V1's
``<BOT>``/``<USER>``) become the partner's own placeholders ``{{partner}}``/``{{user}}``, and
back on export.

An import is planned first (:func:`plan_import`: every file's bytes and a summary for the
owner to confirm) and written only when confirmed, whole or not at all: as a new partner of
the catalog (:func:`import_files`, :meth:`partners.catalog.PartnerCatalog.add`: a directory,
or rows of the database), or by :func:`write_import` into a directory. An export reads the
partner's own files as the catalog loaded them and its Markdown files as the memory store
gives them (:func:`export_partner`), wherever they are kept.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from partners.card_files import read_character
from partners.card_format import (
    MAX_CARD_JSON_BYTES,
    Card,
    CardError,
    card_json_v3,
    dump_json,
    parse_json,
    png_image,
    write_png,
)
from partners.lore import DEFAULT_BUDGET, Lorebook
from partners.lore_books import LOREBOOK_FILE as LOREBOOK_FILE
from partners.lore_books import book_of, too_large_notes
from partners.lore_format import check_book
from partners.partner_directories import write_directory
from partners.persona import (
    AVATAR_FILE,
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    PARTNER_ID,
    Partner,
    check_partner_id,
    load_partner,
)
from partners.persona import CARD_FILE as CARD_FILE

FIX_HERE = "fix it there"
ASSETS_FOLDER = "assets/"
"""Where a CHARX card's other files are kept in the partner, by their names in the zip."""
FIELD_FILES = {
    "system_prompt": "SYSTEM.md",
    "personality": "SOUL.md",
    "description": "IDENTITY.md",
    "scenario": "SCENARIO.md",
    "mes_example": "EXAMPLES.md",
    "post_history_instructions": "POST_HISTORY.md",
}
"""Card field -> the partner file that holds it."""
GREETING_FIELDS = ("first_mes", "alternate_greetings", "group_only_greetings")
UNUSED_FIELDS = {
    "group_only_greetings": "group-only greetings",
    "nickname": "nickname",
    "creator_notes_multilingual": "translated creator notes",
    "assets": "assets other than the avatar",
    "source": "source links",
}
"""Kept in card.json and exported again, but nothing here uses them yet."""
_CHAR = re.compile(r"\{\{\s*char\s*\}\}|<BOT>", re.IGNORECASE)
_USER = re.compile(r"\{\{\s*user\s*\}\}|<USER>", re.IGNORECASE)
_PARTNER = re.compile(r"\{\{partner\}\}")
_ORIGINAL = re.compile(r"\{\{\s*original\s*\}\}", re.IGNORECASE)


def to_partner_text(text: str) -> str:
    """A card's macros as the partner's placeholders."""
    return _USER.sub("{{user}}", _CHAR.sub("{{partner}}", text))


def to_card_text(text: str) -> str:
    return _PARTNER.sub("{{char}}", text)


PRIVATE_NOTE = "private: only you can pick it until /admin partner set {id} public true"
"""An imported partner is private (``public: false``): a card is somebody else's writing, which
the owner reads and shapes before anyone else can choose it in /partner."""


@dataclass
class ImportPlan:
    partner_id: str
    name: str
    spec: str
    files: dict[str, bytes]
    lore_entries: int
    greetings: int
    notes: list[str] = field(default_factory=list)
    """What could not be mapped, or was changed on the way in."""

    def summary(self) -> list[str]:
        """What the owner confirms: one fact a line (card text as the caller escapes it)."""
        sizes = ", ".join(
            f"{name} {len(body.decode('utf-8')):,}"
            for name, body in self.files.items()
            if name.endswith(".md")
        )
        avatar = self.files.get(AVATAR_FILE)
        assets = [body for name, body in self.files.items() if name.startswith(ASSETS_FOLDER)]
        kept = f"{len(assets)} files, {sum(map(len, assets)):,} bytes, in {ASSETS_FOLDER}"
        return [
            f"id: {self.partner_id}",
            f"card: {self.spec}",
            f"files (characters): {sizes or 'none'}",
            f"greetings: {self.greetings}",
            f"lorebook entries: {self.lore_entries}",
            f"avatar: {f'{len(avatar):,} bytes' if avatar else 'none'}",
            *([f"assets: {kept}"] if assets else []),
            PRIVATE_NOTE.format(id=self.partner_id),
            *(f"note: {note}" for note in self.notes),
        ]


def plan_import(
    raw: bytes,
    filename: str,
    partner_id: str | None,
    taken: Path | Callable[[str], bool],
    lore_budget: int = DEFAULT_BUDGET,
) -> ImportPlan:
    """Read a card and lay out the partner it becomes; nothing is written. ``taken`` says
    whether an id is in use: a directory of partners, or a question to the catalog;
    ``lore_budget`` is what its lorebook's entries may take a turn (an entry that never fits
    is named)."""
    card = read_character(raw, filename)
    data = card.data
    chosen = partner_id or slug(data["name"])
    check_partner_id(chosen)
    exists = taken if callable(taken) else lambda pid: (taken / pid).exists()
    if exists(chosen):
        raise CardError(
            f"a partner {chosen!r} exists already; give the new one another id "
            "(companion partners import FILE --id ID, or /admin partner import ID)"
        )
    notes = list(card.notes)
    name = " ".join(data["name"].split())
    if len(name) > MAX_NAME_CHARS:
        notes.append(f"name shortened to {MAX_NAME_CHARS} characters (the whole is in card.json)")
        name = name[:MAX_NAME_CHARS].rstrip()
    files: dict[str, bytes] = {"preset.yml": _preset(name, data)}
    for card_field, file_name in FIELD_FILES.items():
        text = to_partner_text(data.get(card_field, ""))
        if card_field == "system_prompt" and _ORIGINAL.search(text):
            notes.append("{{original}} in the system prompt dropped (there is no default one)")
            text = _ORIGINAL.sub("", text)
        if text.strip():
            files[file_name] = text.encode("utf-8")
    files[CARD_FILE] = _side_file(data)
    entries = 0
    if data.get("character_book") is not None:
        book = check_book(data["character_book"], f"{filename}: character_book")
        files[LOREBOOK_FILE] = dump_book(book.book)
        entries = len(book.entries)
        notes += book.notes
        notes += too_large_notes(Lorebook(book.book), lore_budget)
    if card.image is not None:
        files[AVATAR_FILE] = card.image
    files.update(card.assets)
    notes += [f"kept, not used: {label}" for key, label in UNUSED_FIELDS.items() if data.get(key)]
    unused = sorted(key for key in data.get("extensions", {}) if key != "depth_prompt")
    if unused:
        notes.append(f"kept, not used: extensions ({', '.join(unused)})")
    greetings = (1 if data["first_mes"].strip() else 0) + len(data["alternate_greetings"])
    return ImportPlan(chosen, name, card.spec, files, entries, greetings, notes)


def slug(name: str) -> str:
    """A partner id from a card's name: ASCII letters and digits, else "card"."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    candidate = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:32].strip("-")
    return candidate if PARTNER_ID.fullmatch(candidate) else "card"


def _preset(name: str, data: dict[str, Any]) -> bytes:
    """preset.yml of an imported partner; the picker's line is the first line of the card's
    description (its creator notes, often markup or a note to other users, never), passing
    over Markdown headings (``# Identity``) while a line of text follows."""
    text = _USER.sub("you", _CHAR.sub(name, data.get("description", "")))
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    prose = [line for line in lines if not line.startswith("#")]
    tagline = prose[0] if prose else (lines[0].lstrip("#").strip() if lines else "")
    if len(tagline) > MAX_DESCRIPTION_CHARS:
        tagline = tagline[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    lines = [f"name: {json.dumps(name, ensure_ascii=False)}"]
    if tagline:
        lines.append(f"description: {json.dumps(tagline, ensure_ascii=False)}")
    lines.append("memory_scope: per_user")
    lines.append("public: false")  # the owner's until published (PRIVATE_NOTE)
    return ("\n".join(lines) + "\n").encode("utf-8")


def _side_file(data: dict[str, Any]) -> bytes:
    side = {k: v for k, v in data.items() if k not in FIELD_FILES and k != "character_book"}
    for key in GREETING_FIELDS:
        if isinstance(side.get(key), str):
            side[key] = to_partner_text(side[key])
        elif isinstance(side.get(key), list):
            side[key] = [to_partner_text(text) for text in side[key]]
    return json.dumps(side, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8") + b"\n"


def dump_book(book: dict[str, Any]) -> bytes:
    return json.dumps(book, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8") + b"\n"


def import_files(plan: ImportPlan) -> dict[str, bytes]:
    """Every file of the planned partner, its own memory (empty) included."""
    return {**plan.files, "MEMORY.md": plan.files.get("MEMORY.md", b"")}


def write_import(plan: ImportPlan, root: Path) -> Path:
    """Write the planned partner as a directory: all of it or, on any failure, nothing."""
    return write_directory(root, plan.partner_id, import_files(plan))


# ---- export -------------------------------------------------------------------------------

TEXT_FILES = (*FIELD_FILES.values(), "AGENTS.md")
"""The Markdown files an export reads (through the memory store, wherever they are kept)."""


def card_data(partner: Partner, texts: Mapping[str, str]) -> dict[str, Any]:
    """The partner as a V3 card's ``data``: persona files (``texts``: :data:`TEXT_FILES` as
    the memory store gives them, line endings as they are), greetings, lorebook and whatever
    an import kept in card.json. Memory is never part of it. Blocking when the partner's own
    files are on disk."""
    side: dict[str, Any] = {}
    raw = partner.file(CARD_FILE)
    where = f"partners/{partner.id}/{CARD_FILE}"
    if raw is not None:
        side = parse_json(raw, where, MAX_CARD_JSON_BYTES, FIX_HERE)
        if not isinstance(side, dict):
            raise CardError(f"{where}: should be a JSON object; {FIX_HERE}")
    full_name = str(side.get("name", ""))
    data: dict[str, Any] = dict(side)
    name = partner.preset.name
    data["name"] = full_name if full_name[:MAX_NAME_CHARS].rstrip() == name else name
    for card_field, file_name in FIELD_FILES.items():
        data[card_field] = to_card_text(texts.get(file_name, ""))
    agents = texts.get("AGENTS.md", "").strip()
    if agents:  # the owner's ways of working, which a card has no field for
        joined = "\n\n".join(part for part in (data["system_prompt"].strip(), agents) if part)
        data["system_prompt"] = to_card_text(joined)
    for key in GREETING_FIELDS:
        value = data.get(key)
        if isinstance(value, str):
            data[key] = to_card_text(value)
        elif isinstance(value, list):
            data[key] = [to_card_text(text) for text in value]
    data.setdefault("first_mes", "")
    data.setdefault("alternate_greetings", [])
    data.setdefault("group_only_greetings", [])
    data.setdefault("creator_notes", "")
    data.setdefault("tags", [])
    data.setdefault("creator", "")
    data.setdefault("character_version", "")
    data.setdefault("extensions", {})
    book = book_of(partner)
    if book is not None:
        data["character_book"] = book
    return data


def _file_text(path: Path) -> str:
    """A persona file's text with its line endings as they are (read_text would turn CRLF
    into LF); "" if there is none."""
    return path.read_bytes().decode("utf-8") if path.exists() else ""


def export_card(partner_dir: Path, as_png: bool) -> bytes:
    """A partner directory as a V3 card (its files read from disk): :func:`export_partner`."""
    texts = {name: _file_text(partner_dir / name) for name in TEXT_FILES}
    return export_partner(load_partner(partner_dir), texts, as_png)


def export_partner(partner: Partner, texts: Mapping[str, str], as_png: bool) -> bytes:
    """The partner as a V3 card (V2 fields filled): JSON, or a PNG of its avatar
    (``texts``: as in :func:`card_data`); blocking when its own files are on disk."""
    data = card_data(partner, texts)
    if not as_png:
        return dump_json(card_json_v3(data)) + b"\n"
    return write_png(_avatar_png(partner), data)


def _avatar_png(partner: Partner) -> bytes:
    """The avatar as a PNG without card chunks; a plain tile if the partner has none."""
    avatar = partner.file(AVATAR_FILE)
    if avatar is not None:
        with contextlib.suppress(CardError):  # a JPEG or broken file: the plain tile
            return png_image(avatar, AVATAR_FILE)
    from PIL import Image  # only an export without an avatar needs it

    tile = io.BytesIO()
    Image.new("RGB", (400, 600), (214, 208, 222)).save(tile, format="PNG")
    return tile.getvalue()


def read_card_file(path: Path) -> Card:
    return read_character(path.read_bytes(), path.name)
