"""Editing preset.yml in place: one setting at a time, as ``/admin partner set`` and the
web page change it, and the partner's name when it is made from the template.

A setting's text is parsed for its key (:data:`SETTABLE` says which keys and what each
takes), and the whole file with the new value is checked against
:class:`partners.preset.PresetFile` before anything is written. The edit goes through
ruamel.yaml, a round-trip YAML library: it finds where the edited key sits in the owner's file,
and only those lines are replaced — comments, key order, quoting, block scalars and line
endings everywhere else stay byte for byte.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from partners.preset import PartnerError, PresetFile, describe, load_mapping

TRUE_WORDS = ("true", "yes", "on")
FALSE_WORDS = ("false", "no", "off")
UNSET_WORDS = ("none", "default")

SETTABLE: dict[str, str] = {
    "name": "what it is called (up to 60 characters)",
    "description": "one line about it (up to 200 characters)",
    "avatar": "an image URL for Discord, or none",
    "public": "offered in /partner: true or false",
    "model": "the model it talks with, or default",
    "memory_scope": "per_user or shared",
    "timezone": "an IANA zone like Europe/Lisbon, or default",
    "language": "for searching its history: a code like en or es, or default",
    "daily_token_budget": "tokens per day before it rests, or none",
    "context_tokens": "its model's context window in tokens (for its lorebook), or default",
    "resting_message": "what it says when it rests, or default",
    "greetings": "a character card's greetings in_turn or at random",
    "presence": "in a group with other partners: quiet, addressed or lively",
    "proactive.enabled": "whether it may write first: true or false",
    "proactive.window": "when check-ins may go out, like 10:00-20:00",
    "proactive.quiet_hours": "never then, like 22:00-08:00",
    "proactive.max_per_day": "check-ins in any 24 hours",
    "proactive.max_per_week": "check-ins in any 7 days",
    "proactive.idle_hours": "hours without a message from the user first",
}
"""What ``/admin partner set`` may change, with what each takes."""
_OPTIONAL = (
    "avatar",
    "model",
    "timezone",
    "language",
    "daily_token_budget",
    "context_tokens",
    "resting_message",
)
_BOOLEANS = ("public", "proactive.enabled")
_NUMBERS = (
    "daily_token_budget",
    "context_tokens",
    "proactive.max_per_day",
    "proactive.max_per_week",
)
_FRACTIONS = ("proactive.idle_hours",)


def set_setting(path: Path, key: str, raw: str) -> object:
    """Change one setting from a chat command's text: parsed for its key, checked with the
    whole file, then written in place. Returns the value stored (None: the key was removed,
    its default applies)."""
    keys, value = parse_setting(key, raw)
    change_preset(path, keys, value)
    return value


def parse_setting(key: str, raw: str) -> tuple[tuple[str, ...], object]:
    """A setting from a chat command's text: the keys it sits under and its value (None:
    remove it, its default applies); :class:`PartnerError` names what is wrong."""
    if key not in SETTABLE:
        close = difflib.get_close_matches(key, list(SETTABLE), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise PartnerError(f"{key!r} cannot be set; {hint}settable: {', '.join(SETTABLE)}")
    return tuple(key.split(".")), _parsed(key, raw.strip())


def _parsed(key: str, raw: str) -> object:
    if key in _OPTIONAL and raw.lower() in UNSET_WORDS:
        return None
    try:
        if key in _BOOLEANS:
            if raw.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError
            return raw.lower() in TRUE_WORDS
        if key in _NUMBERS:
            return int(raw)
        if key in _FRACTIONS:
            return float(raw)
    except ValueError:
        kind = "true or false" if key in _BOOLEANS else "a number"
        raise PartnerError(f"{key}: takes {kind}, not {raw!r}") from None
    return raw


def change_preset(path: Path, keys: tuple[str, ...], value: object) -> None:
    """Set ``keys`` (a path: ``("proactive", "window")``) to ``value`` (None: remove it) in
    preset.yml, checked against :class:`PresetFile` first; every other byte stays."""
    data = path.read_bytes() if path.exists() else b""
    _write_atomically(path, changed_preset(data, keys, value, path.parent.name))


def set_preset_value(path: Path, key: str, value: str | bool) -> None:
    """Change one top-level key of preset.yml, checked, keeping every other byte of the file."""
    change_preset(path, (key,), value)


def changed_preset(data: bytes, keys: tuple[str, ...], value: object, partner_id: str) -> str:
    """preset.yml's text with ``keys`` set to ``value`` (None: removed), checked against
    :class:`PresetFile` first (:class:`PartnerError` names what is wrong); every other byte
    as it was."""
    where = f"{partner_id}'s preset.yml"
    raw = load_mapping(data, where)
    _apply(raw, keys, value)
    try:
        PresetFile.model_validate(raw)
    except ValidationError as exc:
        raise PartnerError(describe(exc, where)) from None
    text = data.decode("utf-8")  # line endings as they are
    edited = _edited(text, keys, value)
    if _load_text(edited) != raw:  # a shape the line editor does not handle (flow style)
        edited = _dumped(text, keys, value)
    return edited


def _apply(raw: dict[str, Any], keys: tuple[str, ...], value: object) -> None:
    target = raw
    for key in keys[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    if value is None:
        target.pop(keys[-1], None)
    else:
        target[keys[-1]] = value


def _load_text(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text) or {}


def _edited(text: str, keys: tuple[str, ...], value: object) -> str:
    """``text`` with only the lines of ``keys`` replaced (or added, or removed)."""
    crlf = "\r\n" in text
    lines = (text.replace("\r\n", "\n") if crlf else text).split("\n")
    mapping = YAML().load(text) or CommentedMap()
    lines = _edit_lines(lines, mapping, keys, value, indent=0)
    result = "\n".join(lines)
    return result.replace("\n", "\r\n") if crlf else result


def _edit_lines(
    lines: list[str], mapping: CommentedMap, keys: tuple[str, ...], value: object, indent: int
) -> list[str]:
    key = keys[0]
    if key in mapping and len(keys) > 1 and isinstance(mapping[key], CommentedMap):
        return _edit_lines(lines, mapping[key], keys[1:], value, mapping[key].lc.col)
    if key in mapping:
        start, column = mapping.lc.key(key)
        end = _value_end(lines, start, column)
        if value is None:
            return lines[:start] + lines[end:]
        rendered = _rendered(keys, value, column)
        if len(keys) == 1 and "\n" not in rendered:
            rendered += _inline_comment(lines[start], mapping, key, start)
        return lines[:start] + rendered.split("\n") + lines[end:]
    if value is None:
        return lines
    added = _rendered(keys, value, indent).split("\n")
    if not mapping:  # an empty file (or only comments): the key goes at the end
        body = lines[:-1] if lines and lines[-1] == "" else lines
        return [*body, *added, ""]
    at = _mapping_end(lines, mapping)
    return lines[:at] + added + lines[at:]


def _value_end(lines: list[str], start: int, column: int) -> int:
    """The line after a key's value: its own line and the ones indented deeper (a block
    scalar, a nested mapping), without the blank lines that follow it."""
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > column):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return end


def _mapping_end(lines: list[str], mapping: CommentedMap) -> int:
    """Where a key added to ``mapping`` goes: after its last value."""
    last = list(mapping)[-1]
    start, column = mapping.lc.key(last)
    return _value_end(lines, start, column)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _rendered(keys: tuple[str, ...], value: object, indent: int) -> str:
    """``key: value`` as YAML at ``indent`` (with its missing parents, if any)."""
    tree: object = value
    for key in reversed(keys):
        tree = {key: tree}
    stream = io.StringIO()
    dumper = YAML()
    dumper.width = 10**6
    dumper.dump(tree, stream)
    pad = " " * indent
    return "\n".join(pad + line for line in stream.getvalue().rstrip("\n").split("\n"))


def _inline_comment(line: str, mapping: CommentedMap, key: str, start: int) -> str:
    """The comment at the end of a key's line (``name: Kai   # what people call it``), with
    the spaces before it, kept for the new value."""
    tokens = mapping.ca.items.get(key) or []
    comment = next((t for t in tokens[2:3] if t is not None), None)
    if comment is None or comment.start_mark.line != start:
        return ""
    column = comment.start_mark.column
    gap = re.search(r"\s*$", line[:column])
    return (gap.group(0) if gap else " ") + line[column:]


def _dumped(text: str, keys: tuple[str, ...], value: object) -> str:
    """The whole file through ruamel.yaml's round trip: comments and order kept, layout
    possibly not (for flow-style mappings the line editor cannot place a key in)."""
    yaml = YAML()
    yaml.width = 10**6
    document = yaml.load(text) or CommentedMap()
    target = document
    for key in keys[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = CommentedMap()
        target = target[key]
    if value is None:
        target.pop(keys[-1], None)
    else:
        target[keys[-1]] = value
    stream = io.StringIO()
    yaml.dump(document, stream)
    return stream.getvalue()


def _write_atomically(path: Path, text: str) -> None:
    """Write via a temporary file and a rename: a crash leaves the old file or the new one."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".preset-", suffix=".yml")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
