"""preset.yml: what a partner is called and how it behaves, read as a typed file.

Reading validates the file against :class:`PresetFile` the way config.toml is validated: an
unknown key is refused with the known key it most resembles, and every error names the file
and the key (``partners/kai/preset.yml: proactive.window: ...``). A directory written by the
dsh-preset-md companion plugin (``name``, ``description``, ``order``) loads as it is.

Editing the file in place (``/admin partner set``) is :mod:`partners.preset_edit`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeGuard

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
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from bot.config.access import check_timezone
from bot.store.search_terms import DEFAULT_LANGUAGE, search_language

MAX_NAME_CHARS = 60
MAX_DESCRIPTION_CHARS = 200
MCP_ENTRY = r"^[a-z0-9][a-z0-9-]{0,23}(\.[A-Za-z0-9_.-]{1,64})?$"
SPAN = r"^([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-3]):[0-5]\d$"

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
    mcp: list[str] = Field(default_factory=list)
    """The MCP servers (``clock``) and single tools (``clock.now``) of config.toml's ``[mcp]``
    this partner may use (docs/tools.md); allow and deny then apply to them as to any tool."""

    @field_validator("mcp")
    @classmethod
    def _server_or_tool(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not re.match(MCP_ENTRY, str(entry)):
                raise ValueError(
                    f"{entry!r} is not a server (clock) or a server's tool (clock.now) "
                    "as named in config.toml's [mcp.servers]"
                )
        return value


class ProactiveSettings(_Strict):
    """Check-ins (``partners/checkins.py``): when the partner may write first."""

    enabled: bool = False
    window: str = Field("10:00-20:00", pattern=SPAN)
    quiet_hours: str = Field("22:00-08:00", pattern=SPAN)
    max_per_day: int = Field(1, ge=0)
    max_per_week: int = Field(2, ge=0)
    idle_hours: float = Field(24, ge=0)


class PresetFile(_Strict):
    """Every key preset.yml may hold (docs/partners.md)."""

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
    context_tokens: int | None = Field(None, ge=512, le=10_000_000)
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
    presence: Literal["quiet", "addressed", "lively"] = "addressed"
    """How the partner takes part in a group with other partners (``bot/gateway/speak_gate.py``)."""
    interests: list[Annotated[str, Field(min_length=1, max_length=60)]] = Field(
        default_factory=list, max_length=50
    )
    """Topics that draw the partner into talk nobody addressed to it (``speak_score.py``)."""

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
    tools_mcp: tuple[str, ...] = ()
    """MCP servers and server.tool names the partner may use (``[mcp]`` in config.toml)."""
    daily_token_budget: int | None = None
    """Tokens the partner may use per day (owner's time zone) before it rests; None: no limit."""
    context_tokens: int | None = None
    """Its model's context window, for its lorebook's budget (None: ``[llm] context_tokens``)."""
    resting_message: str | None = None
    """What the partner says, once, when it rests (over its budget or a user's rate limit)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Settings read elsewhere, as written (:data:`EXTRA_KEYS`)."""
    greetings: Literal["in_turn", "random"] = "in_turn"
    """A card's greetings in turn, or one at random."""


# ---- reading -------------------------------------------------------------------------------


EXTRA_KEYS = ("proactive", "vision", "voice", "stickers", "presence", "interests")
"""Checked here, read where they are used (check-ins, media, voice replies, stickers, the
speak gate of scenes)."""


def read_preset(path: Path, partner_id: str) -> Preset:
    """preset.yml as a :class:`Preset` (a missing file is an empty one: all defaults)."""
    data = path.read_bytes() if path.exists() else b""
    return parse_preset(data, str(path), partner_id)


def parse_preset(data: bytes, where: str, partner_id: str) -> Preset:
    """preset.yml's bytes as a :class:`Preset`; errors name ``where`` (its file, or its row)."""
    raw = load_mapping(data, where)
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
        tools_mcp=tuple(checked.tools.mcp),
        daily_token_budget=checked.daily_token_budget,
        context_tokens=checked.context_tokens,
        resting_message=checked.resting_message or None,
        extra=extra,
        greetings=checked.greetings,
    )


def load_mapping(data: bytes, where: str) -> dict[str, Any]:
    """preset.yml's bytes as the mapping it holds (unchecked); PartnerError names ``where``."""
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
