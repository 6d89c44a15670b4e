"""The template a new partner starts from: the example partner shipped in
``partners/template/example``, given the new partner's name.

A new partner is private (``public: false``): only the owner can pick it until they publish
it with ``/admin partner set ID public true``, so nobody meets a persona still being written.
(The example partner made on the first start keeps the template's ``public: true``: someone
must be there to talk to.)

The template's name is the one thing in it that is not a placeholder: a new partner gets its
own name in preset.yml's ``name`` and wherever the template's name appears in its preset and
persona files (comments and persona text alike). Used for a directory on disk
(:func:`rename_template`) and for files about to become rows of the database
(:func:`renamed`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

from partners.documents import write_atomic
from partners.persona import MAX_NAME_CHARS, PRESET_FILE, PartnerError
from partners.preset import parse_preset
from partners.preset_edit import changed_preset

EXAMPLE_PARTNER = "example"
TEMPLATE_SUFFIXES = (".yml", ".md")
"""The template's files that carry its name (its preset and persona)."""


def template_dir() -> Path:
    return Path(str(resources.files("partners") / "template" / EXAMPLE_PARTNER))


def template_files() -> dict[str, bytes]:
    """The template's files by name (blocking)."""
    root = template_dir()
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def checked_name(name: str | None) -> str | None:
    """A new partner's name as given, trimmed (None: its id will do); PartnerError if it is
    empty or too long."""
    if name is None:
        return None
    if len(name) > MAX_NAME_CHARS:
        raise PartnerError(f"name is {len(name)} characters; the limit is {MAX_NAME_CHARS}")
    if not name.strip():
        raise PartnerError("a name cannot be empty")
    return name.strip()


def renamed(files: Mapping[str, bytes], name: str, partner_id: str) -> dict[str, bytes]:
    """A fresh copy of the template's files with its own name: in preset.yml's ``name`` and
    wherever the template's name appears in its files (comments and persona text alike);
    private until published."""
    preset = files.get(PRESET_FILE, b"")
    template_name = parse_preset(preset, f"{partner_id}'s {PRESET_FILE}", partner_id).name
    result = dict(files)
    if template_name:
        pattern = re.compile(rf"\b{re.escape(template_name)}\b")
        for file_name, data in files.items():
            if file_name.endswith(TEMPLATE_SUFFIXES):
                text = pattern.sub(lambda _: name, data.decode("utf-8"))
                result[file_name] = text.encode("utf-8")
    preset_text = changed_preset(result.get(PRESET_FILE, b""), ("name",), name, partner_id)
    preset_text = changed_preset(preset_text.encode("utf-8"), ("public",), False, partner_id)
    result[PRESET_FILE] = preset_text.encode("utf-8")
    return result


def rename_template(directory: Path, name: str) -> None:
    """Give a fresh copy of the template on disk its own name (:func:`renamed`)."""
    files = {
        p.name: p.read_bytes()
        for p in directory.iterdir()
        if p.is_file() and p.name.endswith(TEMPLATE_SUFFIXES)
    }
    for file_name, data in renamed(files, name, directory.name).items():
        if data != files.get(file_name):
            write_atomic(directory / file_name, data)
