"""Characters from apps that came before the card spec: Pygmalion (TavernAI, gradio) JSON and
oobabooga text-generation-webui YAML, lifted into a card's ``data`` as SillyTavern converts
them.

Pygmalion: ``char_name`` is the name, ``char_persona`` the description, ``world_scenario`` the
scenario, ``char_greeting`` the first message, ``example_dialogue`` the example messages and
``creatorcomment`` (or ``creator_notes``) the creator notes. oobabooga: the name from ``name``
(or, as text-generation-webui looks, ``bot``, ``<|bot|>``, ``char_name``), ``context`` as the
description and ``greeting`` as the first message; a YAML file in Pygmalion's shape (a
``char_persona`` and no ``context``) reads as Pygmalion, as text-generation-webui reads it.
Every other top-level field is kept, as for a V1 card.

YAML is read with the safe loader after a first pass over its events: over
:data:`MAX_YAML_BYTES`, nested deeper than JSON may be, or using an alias (``*name``: the
"billion laughs" that grows a small file into gigabytes once walked) it is refused before a
single value is built.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from partners.card_format import MAX_JSON_DEPTH, CardError, checked_data

PYGMALION_FIELDS = {
    "char_name": "name",
    "char_persona": "description",
    "world_scenario": "scenario",
    "char_greeting": "first_mes",
    "example_dialogue": "mes_example",
}
PYGMALION_NOTES = ("creatorcomment", "creator_notes")
PLACEHOLDER_NOTE = "Creator's notes go here."
"""What TavernAI wrote into empty creator notes; SillyTavern drops it."""
OOBA_NAMES = ("name", "bot", "<|bot|>", "char_name")
"""Where text-generation-webui looks for the character's name, in this order."""
OOBA_FIELDS = {"context": "description", "greeting": "first_mes"}
MAX_YAML_BYTES = 1024 * 1024
"""A YAML character larger than this is refused before it is parsed: the safe loader is pure
Python (about a second a megabyte), and a character's context is a few pages."""
MAX_YAML_EVENTS = 200_000
FIX_YAML = "fix the file, or export the character again"


def is_pygmalion(document: Mapping[str, Any]) -> bool:
    """SillyTavern's order: a ``spec`` is a card, a ``name`` a V1 card, then ``char_name``."""
    return "spec" not in document and "name" not in document and "char_name" in document


def is_ooba(document: Mapping[str, Any]) -> bool:
    named = any(_filled(document.get(key)) for key in OOBA_NAMES)
    return named and any(key in document for key in (*OOBA_FIELDS, "char_persona"))


def from_pygmalion(document: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The card ``data`` of a Pygmalion character."""
    data = _extras(document, (*PYGMALION_FIELDS, *PYGMALION_NOTES), where)
    for source, target in PYGMALION_FIELDS.items():
        data[target] = _text(document, source, where)
    notes = next((key for key in PYGMALION_NOTES if document.get(key) is not None), None)
    if notes is not None:
        data["creator_notes"] = _text(document, notes, where).replace(PLACEHOLDER_NOTE, "")
    return checked_data(data, where)


def from_ooba(document: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The card ``data`` of a text-generation-webui character (its YAML, or the same keys as
    JSON)."""
    if "context" not in document and "char_persona" in document:
        return from_pygmalion({**document, "char_name": _name(document, where)}, where)
    data = _extras(document, (*OOBA_NAMES, *OOBA_FIELDS), where)
    data["name"] = _name(document, where)
    for source, target in OOBA_FIELDS.items():
        data[target] = _text(document, source, where)
    return checked_data(data, where)


def _name(document: Mapping[str, Any], where: str) -> str:
    key = next(key for key in OOBA_NAMES if _filled(document.get(key)))
    return _text(document, key, where)


def _filled(value: object) -> bool:
    return value is not None and value != ""


def _text(document: Mapping[str, Any], key: str, where: str) -> str:
    value = document.get(key)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kind = "a yes/no" if isinstance(value, bool) else type(value).__name__
        raise CardError(f"{where}: field {key!r} should be text, not {kind} (quote it)")
    return str(value)


def _extras(document: Mapping[str, Any], mapped: tuple[str, ...], where: str) -> dict[str, Any]:
    """The fields not mapped, kept as they are; a YAML value JSON has no form for (a date, a
    set, binary) is refused, naming the field."""
    extras = {str(key): value for key, value in document.items() if key not in mapped}
    for key, value in extras.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise CardError(
                f"{where}: field {key!r} holds {type(value).__name__}, which a character file "
                "keeps only as text (quote it)"
            ) from None
    return extras


# ---- YAML ---------------------------------------------------------------------------------


def yaml_document(raw: bytes, where: str) -> object:
    """The YAML document in ``raw``, read safely within the bounds above."""
    if len(raw) > MAX_YAML_BYTES:
        raise CardError(
            f"{where}: {len(raw):,} bytes of YAML is over the limit of {MAX_YAML_BYTES:,}"
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CardError(f"{where}: not UTF-8 text; save it as UTF-8") from None
    try:
        _check_events(text, where)
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise CardError(f"{where}: invalid YAML ({_yaml_problem(exc)}); {FIX_YAML}") from None


def _check_events(text: str, where: str) -> None:
    """Refuse aliases, nesting deeper than :data:`MAX_JSON_DEPTH` and too many values, from
    the parser's events alone (nothing is built yet)."""
    depth = 0
    for count, event in enumerate(YAML(typ="safe", pure=True).parse(text)):
        if isinstance(event, AliasEvent):
            raise CardError(
                f"{where}: the YAML uses an alias (*name); a character file is read without "
                "them: write the value out where it is used"
            )
        if isinstance(event, MappingStartEvent | SequenceStartEvent):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise CardError(f"{where}: YAML nested deeper than {MAX_JSON_DEPTH} levels")
        elif isinstance(event, MappingEndEvent | SequenceEndEvent):
            depth -= 1
        if count > MAX_YAML_EVENTS:
            raise CardError(f"{where}: YAML of more than {MAX_YAML_EVENTS:,} values")


def _yaml_problem(exc: YAMLError) -> str:
    if isinstance(exc, MarkedYAMLError) and exc.problem_mark is not None:
        return f"line {exc.problem_mark.line + 1}: {exc.problem}"
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
