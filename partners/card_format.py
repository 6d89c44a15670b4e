"""Character Card files as front-ends write them: JSON (V1, V2, V3) and PNG images carrying the
card in a ``tEXt`` chunk (``chara``: V2, ``ccv3``: V3, both base64 JSON).

No maintained Python parser was sound enough to depend on (card-forge is a command-line tool
that prints, needs PyYAML and reads the card from any text chunk through Pillow, compressed
ones included; aichar is a compiled extension whose code cannot be read here), so this is a
small reader and writer on the standard library. It reads only what the specs define
(character-card-spec-v2, kwaroran's V3) and refuses the rest with one line naming what is wrong:
a card is untrusted input from the internet.

A card read is a :class:`Card`: the V3 ``data`` object with every field present (V1 and V2
cards are lifted into it), plus the image the card was carried in with the card chunks taken
out — the partner's avatar. Its ``character_book`` is checked by ``partners/lore_format.py``
where the book is taken in (``partners/cards.py``, ``companion lore import``). The other shapes
people bring (CHARX zips, RisuAI's JPEG, Pygmalion JSON, oobabooga YAML) are told apart and
read by ``partners/card_files.py``, each into this same validated ``data``.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from partners.preset import PartnerError

MAX_CARD_FILE_BYTES = 20 * 1024 * 1024
"""A card file (the PNG with its image) larger than this is refused before it is parsed."""
MAX_CARD_JSON_BYTES = 8 * 1024 * 1024
"""The card's JSON itself (a 1 MB description and a 500-entry lorebook fit easily)."""

MAX_JSON_DEPTH = 64
"""Objects and lists inside each other, at most, in any JSON read here (cards, lorebooks,
world info): front-ends nest a handful deep. Past about a thousand levels Python's parser
fails with RecursionError, and so would every later walk over the data (checks, copies,
writing it out again)."""
FIX_CARD = "export the card again from its front-end"

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = ("ccv3", "chara")
"""Card chunks, the one preferred first: a V3 card also carries a V2 copy for old readers.
As SillyTavern reads them: keywords in any case, and of two chunks with one keyword (sites
add their own copy beside the card's) the first."""
V2_SPEC = "chara_card_v2"
V3_SPEC = "chara_card_v3"

TEXT_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
    "character_version",
    "nickname",
)
LIST_FIELDS = ("alternate_greetings", "tags", "group_only_greetings")
V1_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example")


class CardError(PartnerError):
    """A card that cannot be read; the message is one line naming the problem."""


@dataclass(frozen=True)
class Card:
    data: dict[str, Any]
    """The V3 ``data`` object, every known field present."""
    image: bytes | None
    """The PNG the card came in, card chunks removed; None for a JSON card."""
    spec: str
    """What the file was: "V1", "V2" or "V3" (JSON or PNG), or another app's shape."""
    assets: Mapping[str, bytes] = field(default_factory=dict)
    """Files the card brought besides its avatar, by the name they take in the partner
    (``assets/…``: a CHARX zip's other pictures); empty for other cards."""
    notes: tuple[str, ...] = ()
    """What the reading left out or changed, for the owner to see before confirming."""


# ---- reading ------------------------------------------------------------------------------


def read_card(raw: bytes, filename: str = "card") -> Card:
    """A card from a file's bytes: PNG if it starts like one, else JSON (every other shape:
    ``partners.card_files.read_character``)."""
    check_file_size(raw, filename)
    if raw.startswith(PNG_SIGNATURE):
        text, image = _card_from_png(raw, filename)
        card = parse_card_json(text, filename)
        return Card(card.data, image, f"{card.spec} PNG")
    return parse_card_json(raw, filename)


def check_file_size(raw: bytes, filename: str) -> None:
    if len(raw) > MAX_CARD_FILE_BYTES:
        raise CardError(
            f"{filename}: {len(raw):,} bytes is over the limit of {MAX_CARD_FILE_BYTES:,} "
            "for a card file"
        )


def parse_json(raw: bytes | str, where: str, max_bytes: int, fix: str) -> Any:
    """The JSON document in ``raw``, or CardError in one line naming ``where``, what is wrong
    (too large, invalid, nested deeper than ``MAX_JSON_DEPTH``) and ``fix``, what to do."""
    if len(raw) > max_bytes:
        raise CardError(
            f"{where}: {len(raw):,} bytes of JSON is over the limit of {max_bytes:,}; {fix}"
        )
    try:
        document = json.loads(raw.decode("utf-8-sig") if isinstance(raw, bytes) else raw)
    except RecursionError:
        document = None
        too_deep = True
    except (UnicodeDecodeError, ValueError) as exc:
        raise CardError(f"{where}: invalid JSON ({_first_line(exc)}); {fix}") from None
    else:
        too_deep = _deeper_than(document, MAX_JSON_DEPTH)
    if too_deep:
        raise CardError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels; {fix}")
    return document


def _deeper_than(document: object, levels: int) -> bool:
    """Whether objects and lists nest more than ``levels`` deep (walked without recursion)."""
    stack: list[tuple[object, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Iterable[object] = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > levels:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_card_json(raw: bytes | str, filename: str = "card") -> Card:
    """A card from its JSON text (V1, V2 or V3)."""
    document = parse_json(raw, filename, MAX_CARD_JSON_BYTES, FIX_CARD)
    if not isinstance(document, dict):
        raise CardError(f"{filename}: not a card: the JSON is not an object")
    return card_from_document(document, filename)


def card_from_document(document: Mapping[str, Any], filename: str) -> Card:
    """A card from its JSON object: V2 or V3 by its ``spec``, V1 without one."""
    spec = document.get("spec")
    if spec is None:
        return Card(_from_v1(dict(document), filename), None, "V1")
    version = str(document.get("spec_version", ""))
    if spec == V3_SPEC and version.split(".")[0] == "3":
        return Card(checked_data(document.get("data"), filename), None, "V3")
    if spec == V2_SPEC and version.split(".")[0] == "2":
        return Card(checked_data(document.get("data"), filename), None, "V2")
    raise CardError(
        f"{filename}: unsupported card spec {str(spec)[:40]!r} version {version[:10]!r}; "
        f"this reads {V2_SPEC} 2.x and {V3_SPEC} 3.x (and V1 cards without a spec)"
    )


def _from_v1(document: dict[str, Any], filename: str) -> dict[str, Any]:
    """A V1 card's fields, every one of them: front-ends wrote more than the six V1 ones
    (creator notes, tags, talkativeness, …) at the top level, and they are the card's."""
    if not isinstance(document.get("name"), str) or not document["name"].strip():
        raise CardError(f"{filename}: not a card: no 'spec' and no 'name'")
    return checked_data({**{key: "" for key in V1_FIELDS}, **document}, filename)


def checked_data(data: object, filename: str) -> dict[str, Any]:
    """The ``data`` object with every field present and of its type."""
    if not isinstance(data, dict):
        raise CardError(f"{filename}: not a card: 'data' is not an object")
    data = copy.deepcopy(data)
    for key in TEXT_FIELDS:
        value = data.get(key)
        if value is None:
            data[key] = ""
        elif not isinstance(value, str):
            raise CardError(f"{filename}: field {key!r} should be text, not {type(value).__name__}")
    for key in LIST_FIELDS:
        value = data.get(key)
        if value is None:
            data[key] = []
        elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise CardError(f"{filename}: field {key!r} should be a list of texts")
    if not data["name"].strip():
        raise CardError(f"{filename}: the card has no name")
    if not isinstance(data.get("extensions", {}), dict):
        raise CardError(f"{filename}: field 'extensions' should be an object")
    data.setdefault("extensions", {})
    return data


def _card_from_png(raw: bytes, filename: str) -> tuple[bytes, bytes]:
    """The card's JSON from a PNG's text chunk, and the PNG without its card chunks."""
    found: dict[str, bytes] = {}
    compressed: list[str] = []
    kept = [PNG_SIGNATURE]
    for kind, body, chunk in _chunks(raw, filename):
        keyword = body.split(b"\0", 1)[0].decode("latin-1").lower()
        if kind == b"tEXt" and keyword in CARD_KEYWORDS:
            found.setdefault(keyword, body[len(keyword) + 1 :])
            continue
        if kind in (b"zTXt", b"iTXt") and keyword in CARD_KEYWORDS:
            compressed.append(f"{kind.decode()} {keyword!r}")
        kept.append(chunk)
    chosen = next((k for k in CARD_KEYWORDS if k in found), None)
    if chosen is None:
        if compressed:
            raise CardError(
                f"{filename}: the card is in a {compressed[0]} chunk; cards are read from "
                "uncompressed tEXt chunks only (re-export it from the front-end)"
            )
        raise CardError(f"{filename}: a PNG without a character card (no 'chara' or 'ccv3' chunk)")
    try:
        text = base64.b64decode(found[chosen], validate=True)
    except (binascii.Error, ValueError):
        raise CardError(f"{filename}: the {chosen!r} chunk is not valid base64") from None
    return text, b"".join(kept)


def png_image(raw: bytes, filename: str) -> bytes:
    """A PNG with any card chunks taken out (the image alone); CardError if it is not one."""
    if not raw.startswith(PNG_SIGNATURE):
        raise CardError(f"{filename}: not a PNG image")
    chunks = _chunks(raw, filename)
    kept = [
        chunk
        for kind, body, chunk in chunks
        if kind != b"tEXt" or body.split(b"\0", 1)[0].decode("latin-1").lower() not in CARD_KEYWORDS
    ]
    return PNG_SIGNATURE + b"".join(kept)


def _chunks(raw: bytes, filename: str) -> list[tuple[bytes, bytes, bytes]]:
    """(type, data, whole chunk) for each chunk up to IEND, CRCs checked."""
    chunks = []
    at = len(PNG_SIGNATURE)
    while True:
        if at + 8 > len(raw):
            raise CardError(f"{filename}: truncated PNG (it ends before its IEND chunk)")
        (length,) = struct.unpack(">I", raw[at : at + 4])
        kind = raw[at + 4 : at + 8]
        end = at + 12 + length
        if end > len(raw):
            raise CardError(f"{filename}: truncated PNG (chunk {kind!r} runs past the end)")
        body = raw[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", raw[end - 4 : end])
        if zlib.crc32(kind + body) != crc:
            raise CardError(f"{filename}: damaged PNG (chunk {kind!r} fails its checksum)")
        chunks.append((kind, body, raw[at:end]))
        at = end
        if kind == b"IEND":
            return chunks


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__


# ---- writing ------------------------------------------------------------------------------


def card_json_v3(data: dict[str, Any]) -> dict[str, Any]:
    """The V3 card document around ``data``."""
    return {"spec": V3_SPEC, "spec_version": "3.0", "data": data}


def card_json_v2(data: dict[str, Any]) -> dict[str, Any]:
    """The V2 copy a V3 card carries for older readers: the V2 fields only."""
    v2_fields = (*TEXT_FIELDS[:-1], "alternate_greetings", "tags", "extensions")
    v2 = {key: data[key] for key in v2_fields if key in data}
    if "character_book" in data:
        v2["character_book"] = data["character_book"]
    return {"spec": V2_SPEC, "spec_version": "2.0", "data": v2}


def dump_json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8")


def write_png(image: bytes, data: dict[str, Any]) -> bytes:
    """``image`` (a PNG without card chunks) with the card in ``ccv3`` and a V2 copy in
    ``chara``, both before IEND, as front-ends write them."""
    chunks = _chunks(image, "avatar")
    head = b"".join(chunk for kind, _, chunk in chunks if kind != b"IEND")
    # V3 readers prefer ccv3; V2 readers find chara
    ccv3 = base64.b64encode(json.dumps(card_json_v3(data), ensure_ascii=False).encode())
    chara = base64.b64encode(json.dumps(card_json_v2(data), ensure_ascii=False).encode())
    return (
        PNG_SIGNATURE
        + head
        + _text_chunk(b"chara", chara)
        + _text_chunk(b"ccv3", ccv3)
        + chunks[-1][2]
    )


def _text_chunk(keyword: bytes, text: bytes) -> bytes:
    body = keyword + b"\0" + text
    return (
        struct.pack(">I", len(body))
        + b"tEXt"
        + body
        + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    )
