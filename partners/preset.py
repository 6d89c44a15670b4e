"""preset.yml: what a partner is called and how it behaves, read as a typed file and edited
in place.

Reading validates the file against :class:`PresetFile` the way config.toml is validated: an
unknown key is refused with the known key it most resembles, and every error names the file
and the key (``partners/kai/preset.yml: proactive.window: ...``). A directory written by the
seed-003 companion plugin (``name``, ``description``, ``order``) loads as it is.

Editing (``/admin partner set``) goes through ruamel.yaml, a round-trip YAML library: it
finds where the edited key sits in the owner's file, and only those lines are replaced —
comments, key order, quoting, block scalars and line endings everywhere else stay byte for
byte. A value that is not valid for its key is refused before anything is written.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeGuard

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import ErrorDetails
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from bot.config.model import check_timezone
from bot.store.search_terms import DEFAULT_LANGUAGE, search_language

MAX_NAME_CHARS = 60
MAX_DESCRIPTION_CHARS = 200
SPAN = r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$"
TRUE_WORDS = ("true", "yes", "on")
FALSE_WORDS = ("false", "no", "off")
UNSET_WORDS = ("none", "default")

MemoryScope = Literal["per_user", "shared"]


class PartnerError(ValueError):
    """A partner cannot be loaded or changed; the message names the file and the fix."""


# ---- the file's shape ----------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _text(value: object) -> object:
    """YAML reads ``name: 2049`` as a number; in a text field it is the text."""
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


class Tools(_Strict):
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class ProactiveSettings(_Strict):
    """Check-ins (``partners/checkins.py``): when the partner may write first."""

    enabled: bool = False
    window: str = Field("10:00-20:00", pattern=SPAN)
    quiet_hours: str = Field("22:00-08:00", pattern=SPAN)
    max_per_day: int = Field(1, ge=0)
    max_per_week: int = Field(2, ge=0)
    idle_hours: float = Field(24, ge=0)


class PresetFile(_Strict):
    """Every key preset.yml may hold (README, "Partners")."""

    name: str | None = None
    description: str = ""
    order: int = 0
    model: str | None = None
    memory_scope: MemoryScope = "per_user"
    public: bool = True
    timezone: str | None = None
    language: str | None = None
    avatar: str | None = None
    tools: Tools = Tools()
    daily_token_budget: int | None = Field(None, ge=1)
    resting_message: str | None = None
    proactive: ProactiveSettings | None = None
    vision: bool | None = None
    """The partner's model takes images (else ``llm.vision``; ``bot/turn/media.py``)."""
    voice: str | None = None
    """The speech engine's voice for this partner's spoken replies."""
    stickers: dict[str, Any] | None = None
    """Stickers the partner may send by name: ``happy: <Telegram file id>`` or
    ``happy: {telegram: <file id>, discord: <id>}`` (``Partner.sticker``)."""
    greetings: Literal["in_turn", "random"] = "in_turn"
    """Which of a character card's greetings opens a conversation (``partners/greetings.py``)."""

    _texts = field_validator(
        "name", "description", "model", "language", "avatar", "resting_message", mode="before"
    )(_text)

    @field_validator("name", "description", mode="after")
    @classmethod
    def _trimmed(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        value = value.strip()
        limit = MAX_NAME_CHARS if info.field_name == "name" else MAX_DESCRIPTION_CHARS
        if len(value) > limit:
            raise ValueError(f"is {len(value)} characters; the limit is {limit}")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            check_timezone(value)
        return value

    @field_validator("language")
    @classmethod
    def _known_language(cls, value: str | None) -> str | None:
        return search_language(value) if value else None


@dataclass(frozen=True)
class Preset:
    name: str
    description: str = ""
    order: int = 0
    model: str | None = None
    memory_scope: MemoryScope = "per_user"
    public: bool = True
    timezone: str | None = None
    language: str = DEFAULT_LANGUAGE
    """The stemmer for searching this partner's history (a Snowball language name)."""
    avatar: str | None = None
    tools_allow: tuple[str, ...] = ()
    tools_deny: tuple[str, ...] = ()
    daily_token_budget: int | None = None
    """Tokens the partner may use per day (owner's time zone) before it rests; None: no limit."""
    resting_message: str | None = None
    """What the partner says, once, when it rests (over its budget or a user's rate limit)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Settings read elsewhere, as written (:data:`EXTRA_KEYS`)."""
    greetings: Literal["in_turn", "random"] = "in_turn"
    """A card's greetings in turn, or one at random."""


# ---- reading -------------------------------------------------------------------------------


EXTRA_KEYS = ("proactive", "vision", "voice", "stickers")
"""Checked here, read where they are used (check-ins, media, voice replies, stickers)."""


def read_preset(path: Path, partner_id: str) -> Preset:
    """preset.yml as a :class:`Preset` (a missing file is an empty one: all defaults)."""
    data = path.read_bytes() if path.exists() else b""
    return parse_preset(data, str(path), partner_id)


def parse_preset(data: bytes, where: str, partner_id: str) -> Preset:
    """preset.yml's bytes as a :class:`Preset`; errors name ``where`` (its file, or its row)."""
    raw = _load(data, where)
    try:
        checked = PresetFile.model_validate(raw)
    except ValidationError as exc:
        raise PartnerError(describe(exc, where)) from None
    extra = {key: raw[key] for key in EXTRA_KEYS if key in raw and raw[key] is not None}
    return Preset(
        name=checked.name or partner_id,
        description=checked.description,
        order=checked.order,
        model=checked.model or None,
        memory_scope=checked.memory_scope,
        public=checked.public,
        timezone=checked.timezone,
        language=checked.language or DEFAULT_LANGUAGE,
        avatar=checked.avatar or None,
        tools_allow=tuple(checked.tools.allow),
        tools_deny=tuple(checked.tools.deny),
        daily_token_budget=checked.daily_token_budget,
        resting_message=checked.resting_message or None,
        extra=extra,
        greetings=checked.greetings,
    )


def _load(data: bytes, where: str) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PartnerError(f"{where}: not UTF-8 text; save it as UTF-8") from None
    try:
        raw = YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise PartnerError(f"{where}: not valid YAML ({_where(exc)}); fix it there") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise PartnerError(f"{where}: expected 'key: value' lines, found {type(raw).__name__}")
    return raw


def _where(exc: YAMLError) -> str:
    """A YAML error as "line 3, column 14: <problem>" (ruamel's own text names the input
    "<unicode string>")."""
    if isinstance(exc, MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return str(exc).splitlines()[0]


def describe(exc: ValidationError, where: str) -> str:
    """Validation errors, one line each, naming ``where`` and the key."""
    return "\n".join(_one_error(error, where) for error in exc.errors())


def _one_error(error: ErrorDetails, where: str) -> str:
    location = tuple(str(part) for part in error["loc"])
    key = ".".join(location)
    if error["type"] == "extra_forbidden":
        known = _keys_at(location[:-1])
        close = difflib.get_close_matches(location[-1], known, n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"{where}: {key}: unknown key; {hint}known keys: {', '.join(known)}"
    message = str(error["msg"]).removeprefix("Value error, ")
    shown = repr(error.get("input"))
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{where}: {key}: {message} (got {shown})"


def _keys_at(location: tuple[str, ...]) -> list[str]:
    """The keys a mapping at ``location`` (``("proactive",)``) may hold."""
    model: type[BaseModel] = PresetFile
    for part in location:
        annotation = model.model_fields[part].annotation
        nested = [a for a in getattr(annotation, "__args__", (annotation,)) if _is_model(a)]
        if not nested:
            return []
        model = nested[0]
    return list(model.model_fields)


def _is_model(annotation: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


# ---- editing -------------------------------------------------------------------------------

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
    "resting_message": "what it says when it rests, or default",
    "greetings": "a character card's greetings in_turn or at random",
    "proactive.enabled": "whether it may write first: true or false",
    "proactive.window": "when check-ins may go out, like 10:00-20:00",
    "proactive.quiet_hours": "never then, like 22:00-08:00",
    "proactive.max_per_day": "check-ins in any 24 hours",
    "proactive.max_per_week": "check-ins in any 7 days",
    "proactive.idle_hours": "hours without a message from the user first",
}
"""What ``/admin partner set`` may change, with what each takes."""
_OPTIONAL = ("avatar", "model", "timezone", "language", "daily_token_budget", "resting_message")
_BOOLEANS = ("public", "proactive.enabled")
_NUMBERS = ("daily_token_budget", "proactive.max_per_day", "proactive.max_per_week")
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


def changed_preset(data: bytes, keys: tuple[str, ...], value: object, partner_id: str) -> str:
    """preset.yml's text with ``keys`` set to ``value`` (None: removed), checked against
    :class:`PresetFile` first (:class:`PartnerError` names what is wrong); every other byte
    as it was."""
    where = f"{partner_id}'s preset.yml"
    raw = _load(data, where)
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
