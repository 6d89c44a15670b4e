"""Which kind of character file this is, told by its content (the name only breaks a tie), and
read by the module that knows it: PNG and JSON cards (``partners/card_format.py``), CHARX zips
and RisuAI's JPEG (``partners/card_archive.py``), Pygmalion JSON and oobabooga YAML
(``partners/card_shapes.py``). Each gives the same validated :class:`Card`; a file of none of
these shapes is refused in one line naming what was expected.
"""

from __future__ import annotations

from partners.card_archive import read_charx
from partners.card_format import (
    FIX_CARD,
    MAX_CARD_JSON_BYTES,
    PNG_SIGNATURE,
    Card,
    CardError,
    card_from_document,
    check_file_size,
    parse_json,
    read_card,
)
from partners.card_shapes import from_ooba, from_pygmalion, is_ooba, is_pygmalion, yaml_document

ZIP_SIGNATURE = b"PK\x03\x04"
JPEG_SIGNATURE = b"\xff\xd8\xff"
YAML_SUFFIXES = (".yaml", ".yml")
EXPECTED = (
    "expected a character card (PNG or JSON, V1 to V3), a CHARX zip (.charx, or RisuAI's JPEG "
    "with the zip inside), a Pygmalion JSON character (char_name, char_persona, …) or an "
    "oobabooga YAML character (name, context, greeting)"
)


def read_character(raw: bytes, filename: str = "card") -> Card:
    """A character from a file's bytes, whichever of the known shapes it has."""
    check_file_size(raw, filename)
    if raw.startswith(PNG_SIGNATURE):
        return read_card(raw, filename)
    if raw.startswith(ZIP_SIGNATURE):
        return read_charx(raw, filename)
    if raw.startswith(JPEG_SIGNATURE):
        if b"PK\x05\x06" not in raw[-(22 + 65_535) :]:
            raise CardError(
                f"{filename}: a JPEG without a character card in it (RisuAI's JPEG cards carry "
                f"a CHARX zip after the picture); {EXPECTED}"
            )
        return read_charx(raw, filename, jpeg=True)
    text = raw.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"{") and not filename.lower().endswith(YAML_SUFFIXES):
        return _from_json(raw, filename)
    return _from_yaml(raw, filename)


def _from_json(raw: bytes, filename: str) -> Card:
    document = parse_json(raw, filename, MAX_CARD_JSON_BYTES, FIX_CARD)
    if not isinstance(document, dict):
        raise CardError(f"{filename}: not a card: the JSON is not an object; {EXPECTED}")
    if is_pygmalion(document):
        return Card(from_pygmalion(document, filename), None, "Pygmalion JSON")
    if "spec" not in document and "name" not in document:
        raise CardError(f"{filename}: not a card: no 'spec', 'name' or 'char_name'; {EXPECTED}")
    return card_from_document(document, filename)


def _from_yaml(raw: bytes, filename: str) -> Card:
    """oobabooga's YAML; any other text is refused, as YAML only if it was meant to be."""
    meant = filename.lower().endswith(YAML_SUFFIXES)
    try:
        document = yaml_document(raw, filename)
    except CardError:
        if meant:
            raise
        raise CardError(f"{filename}: not a character file; {EXPECTED}") from None
    if not isinstance(document, dict) or not is_ooba(document):
        found = "YAML without a name and a context or greeting" if meant else "not a card"
        raise CardError(f"{filename}: {found}; {EXPECTED}")
    return Card(from_ooba(document, filename), None, "oobabooga YAML")
