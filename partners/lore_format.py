"""The shape of a lorebook, checked where a book comes in: a card's ``character_book`` when the
card is imported (``partners/cards.py``), a SillyTavern world-info file on ``companion lore
import`` (converted by :mod:`partners.world_info`), and ``lorebook.json`` each time it is
loaded for a turn (``partners/lore_books.py``), since the owner may edit it by hand and older
versions stored books unchecked. Past this module every value has its type; nothing deeper in
a turn checks.

What a book may hold, decided here once for every door it comes through:

- a field that is null takes its default, as if it were absent;
- a list of texts given as one text (``"key": "dragon"``) is a list of that one text, not a
  key per letter;
- a number written as text (``"5"``) or as a float is a number;
- an entry holding anything else of the wrong type (keys that are not texts, content that is
  an object, extensions that are a list, a key over ``MAX_KEY_CHARS``) is left out, with a
  note naming the entry (its number, id or uid, and comment) and the field. The rest of the
  book is kept: one bad entry in a 500-entry world should not cost the other 499, and the
  owner reads the notes before confirming an import (and in the log and ``/admin lore`` for a
  stored book);
- a book whose own settings are wrong (no list of entries, a token budget that is no number)
  is refused whole, in one line: nothing in it can be trusted to mean what it says;
- a book's own ``token_budget`` is kept as written and does not limit a turn: as in
  SillyTavern, what a turn's entries may take is a share of the model's context
  (``partners/lore_books.py``).

A checked book keeps every field it came with (front-ends' own settings included), so an
export loses nothing; only nulls, lone keys and numbers written as text are rewritten.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from partners.card_format import CardError

DEFAULT_SCAN_DEPTH = 2
"""Messages scanned for keys when the book does not say (SillyTavern's default)."""
MAX_TOKEN_BUDGET = 8_000
"""The most a book's entries take per turn by default (``[partners] lore_budget_cap``), however
large the model's context: 8,000 tokens (some 32,000 characters) of background is well past
what a conversation needs, and keeps every request small."""
MAX_KEY_CHARS = 100
"""A key is a name or a phrase. The cap also bounds how many keys can end at one place in a
text (``partners/lore.py``), which keeps the scan linear in the text however the keys
overlap."""
MAX_LORE_ENTRIES = 20_000
MAX_LOREBOOK_BYTES = 20 * 1024 * 1024
"""A lorebook's JSON (lorebook.json, a world-info file): as large as a card file may be."""
MAX_LABEL_CHARS = 40
"""How much of an entry's comment names it in a note."""
FIX_IMPORT = "fix the book and import it again"


def _lone_text(value: object) -> object:
    """``"dragon"`` where a list of keys belongs is the one key ``dragon``."""
    return [value] if isinstance(value, str) else value


def _number(value: object) -> object:
    """5, 5.0 and "5" are the number 5; true, "x", NaN and objects are no number."""
    if isinstance(value, bool):
        raise ValueError("not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, float | str):
        try:
            number = float(value)
        except ValueError:
            raise ValueError("not a number") from None
        if math.isfinite(number):
            return int(number)
    raise ValueError("not a number")


Key = Annotated[str, Field(max_length=MAX_KEY_CHARS)]
Keys = Annotated[list[Key], BeforeValidator(_lone_text)]
Number = Annotated[int, BeforeValidator(_number)]


class _Lenient(BaseModel):
    """Unknown fields are kept as they came; a null takes the field's default."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    @model_validator(mode="before")
    @classmethod
    def _nulls_take_defaults(cls, data: object) -> object:
        if not isinstance(data, Mapping):
            return data
        fields = cls.model_fields
        return {
            key: (
                fields[key].get_default(call_default_factory=True)
                if value is None and key in fields
                else value
            )
            for key, value in data.items()
        }


class EntryExtensions(_Lenient):
    """SillyTavern's settings that an entry carries in ``extensions`` and a turn reads."""

    position: Number | None = None
    probability: Number | None = None
    useProbability: bool = True
    selectiveLogic: Number = 0
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    ignore_budget: bool = False
    match_whole_words: bool | None = None
    case_sensitive: bool | None = None


class BookEntry(_Lenient):
    """One ``character_book`` entry (character-card-spec-v2)."""

    keys: Keys = Field(default_factory=list)
    secondary_keys: Keys = Field(default_factory=list)
    content: str = ""
    extensions: EntryExtensions = Field(default_factory=EntryExtensions)
    enabled: bool = True
    insertion_order: Number = 100
    priority: Number = 0
    position: str | None = None
    constant: bool = False
    selective: bool = False
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    name: str = ""
    comment: str = ""
    id: int | str | None = None


class BookSettings(_Lenient):
    """A ``character_book``'s own fields; its entries are checked one by one."""

    name: str = ""
    description: str = ""
    scan_depth: Number = DEFAULT_SCAN_DEPTH
    token_budget: Number | None = None
    """Kept for export; a turn's budget is a share of the model's context instead."""
    recursive_scanning: bool = False
    extensions: dict[str, Any] = Field(default_factory=dict)


class WorldInfoEntry(_Lenient):
    """One entry of a SillyTavern world-info file (its own field names)."""

    uid: int | str | None = None
    key: Keys = Field(default_factory=list)
    keysecondary: Keys = Field(default_factory=list)
    comment: str = ""
    content: str = ""
    constant: bool = False
    selective: bool = False
    order: Number = 100
    position: Number | str = 0
    """SillyTavern's numbers (0 before the character, 1 after, 2-7 its other places), or a
    character_book's ``before_char``/``after_char``."""
    disable: bool = False
    excludeRecursion: bool | None = None
    preventRecursion: bool | None = None
    ignoreBudget: bool | None = None
    probability: Number | None = None
    useProbability: bool | None = None
    selectiveLogic: Number | None = None
    scanDepth: Number | None = None
    matchWholeWords: bool | None = None
    caseSensitive: bool | None = None


@dataclass(frozen=True)
class CheckedBook:
    book: dict[str, Any]
    """The book as it is stored (``lorebook.json``): bad entries out, nulls filled."""
    settings: BookSettings
    entries: tuple[BookEntry, ...]
    notes: tuple[str, ...]
    """One line per entry left out or value lowered, each naming the book and the entry."""


def check_book(document: object, where: str, fix: str = FIX_IMPORT) -> CheckedBook:
    """A ``character_book`` with every value of its type, or CardError (one line naming
    ``where``, the field, and ``fix``: what the owner should do) if the book itself is wrong."""
    if not isinstance(document, dict) or not isinstance(document.get("entries"), list):
        raise CardError(f"{where}: should be an object with a list of 'entries'; {fix}")
    raw_entries = document["entries"]
    if len(raw_entries) > MAX_LORE_ENTRIES:
        raise CardError(
            f"{where}: {len(raw_entries)} entries is over the limit of {MAX_LORE_ENTRIES}; {fix}"
        )
    settings = _settings(document, where, fix)
    notes: list[str] = []
    entries = []
    for number, raw in enumerate(raw_entries, 1):
        entry = checked_entry(BookEntry, raw, f"{where}: entry {number}", notes)
        if entry is not None:
            entries.append(entry)
    book = settings.model_dump(exclude_unset=True)
    book["entries"] = [entry.model_dump(exclude_unset=True) for entry in entries]
    return CheckedBook(book, settings, tuple(entries), tuple(notes))


def _settings(document: dict[str, Any], where: str, fix: str) -> BookSettings:
    try:
        return BookSettings.model_validate({k: v for k, v in document.items() if k != "entries"})
    except ValidationError as exc:
        raise CardError(f"{where}: {_problem(exc, document)}; {fix}") from None


Model = TypeVar("Model", bound=_Lenient)


def checked_entry(model: type[Model], raw: object, where: str, notes: list[str]) -> Model | None:
    """``raw`` as ``model``, or None with a note naming the entry and what is wrong."""
    if not isinstance(raw, dict):
        notes.append(f"{where} is not an object; left out")
        return None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        notes.append(f"{where}{_identity(raw)}: {_problem(exc, raw)}; left out")
        return None


def _identity(raw: dict[str, Any]) -> str:
    """`` (id 7, 'Castle gate')``: what the owner knows an entry by, on one line."""
    parts = []
    for field in ("id", "uid"):
        if isinstance(raw.get(field), int | str) and not isinstance(raw[field], bool):
            parts.append(f"{field} {' '.join(str(raw[field]).split())[:20]}")
    keys = raw.get("keys", raw.get("key"))
    first_key = keys[0] if isinstance(keys, list) and keys else keys
    for label in (raw.get("name"), raw.get("comment"), first_key):
        if isinstance(label, str) and label.strip():
            text = " ".join(label.split())
            if len(text) > MAX_LABEL_CHARS:
                text = text[: MAX_LABEL_CHARS - 1] + "…"
            parts.append(repr(text))
            break
    return f" ({', '.join(parts)})" if parts else ""


EXPECTED = {
    "keys": "a list of texts",
    "secondary_keys": "a list of texts",
    "key": "a list of texts",
    "keysecondary": "a list of texts",
    "extensions": "an object",
    "id": "a number or a text",
    "uid": "a number or a text",
    "position": "a text",
}
"""What a field should hold, where its type alone would not say it plainly."""


def _problem(exc: ValidationError, raw: dict[str, Any]) -> str:
    """The first error of ``exc`` as ``'field' should be …, not …``."""
    error = exc.errors()[0]
    path, value, item = _located(error["loc"], raw)
    field = ".".join(path) or "?"
    expected = _expected(error["type"], path)
    if error["type"] == "string_too_long" and path and path[-1] in ("keys", "key"):
        found = len(str(error["input"]))
        return f"{field!r}: a key of {found} characters is over the limit of {MAX_KEY_CHARS}"
    if item is not None:
        return f"{field!r} should be {expected}; its item {item + 1} is {_kind(value)}"
    return f"{field!r} should be {expected}, not {_kind(value)}"


def _located(
    loc: tuple[int | str, ...], raw: dict[str, Any]
) -> tuple[list[str], object, int | None]:
    """The field names along ``loc`` that ``raw`` really has (pydantic adds the names of
    union members), the value found there, and the list index if the error is inside a list."""
    path: list[str] = []
    value: object = raw
    item = None
    for part in loc:
        if isinstance(part, str) and isinstance(value, dict) and part in value:
            path.append(part)
            value = value[part]
        elif isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value):
            item = part
            value = value[part]
        else:
            break
    return path, value, item


def _expected(error_type: str, path: list[str]) -> str:
    if path and path[-1] in EXPECTED:
        return EXPECTED[path[-1]]
    if error_type.startswith("bool"):
        return "true or false"
    if error_type.startswith("string"):
        return "text"
    if error_type.startswith(("dict", "model")):
        return "an object"
    return "a number"


def _kind(value: object) -> str:
    """A value as the owner would name it in the JSON: the text itself, or its kind."""
    if isinstance(value, str):
        return repr(value[:30] + ("…" if len(value) > 30 else ""))
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__
