"""Character files in the shapes other apps write, made by the test suite (nothing copied from
anyone's card): CHARX zips as RisuAI writes them, RisuAI's JPEG with the zip appended,
Pygmalion JSON and oobabooga YAML, and broken or hostile zips for the limits."""

from __future__ import annotations

import io
import json
import struct
import zipfile
from typing import Any

from PIL import Image

from tests import card_fixtures as cards


def picture(fmt: str, color: tuple[int, int, int], size: tuple[int, int] = (16, 20)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


def harbour_card(**fields: Any) -> dict[str, Any]:
    """A V3 card whose assets list a main icon, a second icon and two expressions, as RisuAI
    lists them (``embeded://``, its spelling)."""
    data = cards.card_data(name="Tamsin Reed", **fields)
    listed = [
        ("icon", "embeded://assets/icon/image/other.png", "side", "png"),
        ("icon", "embeded://assets/icon/image/main.jpeg", "main", "jpeg"),
        ("emotion", "embeded://assets/emotion/image/joy.webp", "joy", "webp"),
        ("background", "embedded://assets/other/image/pier.png", "pier", "png"),
        ("icon", "ccdefault:", "main", "png"),
    ]
    data["assets"] = [{"type": t, "uri": u, "name": n, "ext": e} for t, u, n, e in listed]
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


MAIN_COLOR = (200, 40, 40)


def harbour_members() -> dict[str, bytes]:
    return {
        "assets/icon/image/other.png": picture("PNG", (10, 10, 10)),
        "assets/icon/image/main.jpeg": picture("JPEG", MAIN_COLOR),
        "assets/emotion/image/joy.webp": picture("WEBP", (240, 220, 30)),
        "assets/other/image/pier.png": picture("PNG", (30, 60, 200)),
        "x_meta/joy.json": b'{"type": "WEBP"}',
    }


def charx(
    document: dict[str, Any] | None = None,
    members: dict[str, bytes] | None = None,
    card_name: str = "card.json",
) -> bytes:
    """A CHARX zip: ``card.json`` first, then the members (deflated, as RisuAI writes them)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        body = json.dumps(document or harbour_card(), ensure_ascii=False).encode("utf-8")
        archive.writestr(card_name, body)
        for name, data in (harbour_members() if members is None else members).items():
            archive.writestr(name, data)
    return out.getvalue()


def jpeg_charx(zip_bytes: bytes | None = None) -> bytes:
    """RisuAI's JPEG card: the picture, then the whole CHARX zip appended."""
    return picture("JPEG", (20, 160, 90), (24, 32)) + (zip_bytes or charx())


def pygmalion(**fields: Any) -> dict[str, Any]:
    document = {
        "char_name": "Oren Vale",
        "char_persona": "{{char}} keeps the lighthouse and distrusts <USER>.",
        "world_scenario": "A storm has cut the island off.",
        "char_greeting": "*the lamp swings* Who goes there, {{user}}?",
        "example_dialogue": "<START>\nYou: Hello?\nOren Vale: State your business.",
        "creatorcomment": "Creator's notes go here. PYG-CREATOR-NOTE",
        "talkativeness": "0.4",
    }
    document.update(fields)
    return document


OOBA_YAML = """\
name: Wren
greeting: |-
  *Wren glances up from the map.* Back already, {{user}}?
context: |-
  Wren is a cartographer who charts the northern fjords.
  {{char}} answers briefly and never guesses a coastline.
your_name: Traveller
"""


def zip_with_names(*names: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("card.json", json.dumps(harbour_card()))
        for name in names:
            archive.writestr(zipfile.ZipInfo(name), b"x")
    return out.getvalue()


def claiming(raw: bytes, member: str, size: int) -> bytes:
    """``raw`` with the central directory's record of ``member`` claiming ``size`` bytes
    uncompressed (what a forged zip says; the data stays as it is)."""
    at = raw.index(b"PK\x01\x02")
    while True:
        name_length = struct.unpack("<H", raw[at + 28 : at + 30])[0]
        if raw[at + 46 : at + 46 + name_length] == member.encode():
            return raw[: at + 24] + struct.pack("<I", size) + raw[at + 28 :]
        at = raw.index(b"PK\x01\x02", at + 46)
