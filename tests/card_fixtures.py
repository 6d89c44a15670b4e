"""Character cards made by the test suite, the way front-ends write them: JSON V1/V2/V3, and
PNGs whose text chunk carries base64 JSON (written with Pillow, not with our own writer)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image
from PIL.PngImagePlugin import PngInfo

from partners.preset_edit import changed_preset


def publish(partner_dir: Path) -> None:
    """Make an imported partner public, as ``/admin partner set ID public true`` does: an
    import is private until then."""
    preset = partner_dir / "preset.yml"
    edited = changed_preset(preset.read_bytes(), ("public",), True, partner_dir.name)
    preset.write_text(edited, encoding="utf-8")


def book(entries: int = 2) -> dict[str, Any]:
    return {
        "name": "Harbour lore",
        "scan_depth": 3,
        "token_budget": 300,
        "recursive_scanning": False,
        "extensions": {},
        "entries": [
            {
                "keys": [f"lighthouse{i}" if i else "lighthouse", "灯台"],
                "content": f"The lighthouse keeper {i} is called Oren; {{{{char}}}} fears him.",
                "extensions": {"selectiveLogic": 0, "position": 0},
                "enabled": True,
                "insertion_order": 100 + i,
                "case_sensitive": False,
                "constant": False,
                "comment": f"keeper {i}",
                "id": i,
            }
            for i in range(entries)
        ],
    }


def card_data(name: str = "Ŝirin 🌙", **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "description": "{{char}} is a lighthouse painter who talks to <USER> kindly.",
        "personality": "Warm, curious, a little shy.",
        "scenario": "{{user}} visits {{Char}}'s studio by the sea.",
        "first_mes": "*looks up from the easel* Oh, hello {{user}}! I'm {{char}}.",
        "mes_example": "<START>\n{{user}}: Hi\n{{char}}: Hello there!",
        "creator_notes": "Best with long replies. SECRET-CREATOR-NOTE",
        "system_prompt": "You are {{char}}. {{original}}",
        "post_history_instructions": "Stay in character as {{char}}.",
        "alternate_greetings": ["Welcome back, {{user}}.", "*waves* Hi!"],
        "tags": ["sea", "art"],
        "creator": "someone",
        "character_version": "1.2",
        "extensions": {"depth_prompt": {"prompt": "x", "depth": 4}, "talkativeness": "0.5"},
    }
    data.update(fields)
    return data


def v2(data: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": data or card_data()}


def v3(data: dict[str, Any] | None = None) -> dict[str, Any]:
    data = data or card_data()
    data = {**data, "nickname": "", "group_only_greetings": [], "character_book": book()}
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": data}


def v1() -> dict[str, Any]:
    data = card_data()
    return {key: data[key] for key in ("name", "description", "personality", "first_mes")}


def image(color: tuple[int, int, int] = (40, 90, 160)) -> Image.Image:
    return Image.new("RGB", (8, 12), color)


def image_png(color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    image(color).save(out, format="PNG")
    return out.getvalue()


def png(document: dict[str, Any] | None, keyword: str = "chara", compressed: bool = False) -> bytes:
    """A PNG with ``document`` as base64 JSON in a text chunk (zTXt if ``compressed``)."""
    info = PngInfo()
    if document is not None:
        encoded = base64.b64encode(json.dumps(document, ensure_ascii=False).encode()).decode()
        info.add_text(keyword, encoded, zip=compressed)
    out = io.BytesIO()
    image().save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def png_with_raw_text(keyword: str, text: bytes) -> bytes:
    info = PngInfo()
    info.add_text(keyword, text.decode("latin-1"))
    out = io.BytesIO()
    image().save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def as_json(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False).encode("utf-8")


def deep_card(levels: int) -> bytes:
    """A V2 card's JSON whose extensions nest ``levels`` objects deep, written as text
    (json.dumps would itself fail past a thousand levels)."""
    nested = '{"a": ' * (levels - 1) + "{}" + "}" * (levels - 1)
    head = '{"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "Deep", '
    return f'{head}"extensions": {nested}}}}}'.encode()


def large_world_book(entries: int = 27, chars: int = 860) -> dict[str, Any]:
    """A book that holds a whole world in large entries, as some cards do: the first constant,
    every one about ``chars`` tokens of CJK text (a token a character), each with its own key."""
    places = ["港口", "灯塔", "市场", "山谷", "森林", "城堡", "河流", "寺庙", "码头"]
    return {
        "name": "Big world",
        "entries": [
            {
                "keys": [] if i == 0 else [f"{places[i % len(places)]}{i}"],
                "content": f"第{i}条。" + "风" * chars,
                "constant": i == 0,
                "insertion_order": 100 + i,
                "enabled": True,
                "comment": f"part {i}",
                "extensions": {},
            }
            for i in range(entries)
        ],
    }


def png_with_chunks(*chunks: tuple[str, dict[str, Any]]) -> bytes:
    """A PNG carrying each (keyword, card) as base64 JSON in its own tEXt chunk, in order, as
    a site that adds its copy of the card beside the one already there writes it."""
    info = PngInfo()
    for keyword, document in chunks:
        encoded = base64.b64encode(json.dumps(document, ensure_ascii=False).encode()).decode()
        info.add_text(keyword, encoded)
    out = io.BytesIO()
    image().save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def novelai_lorebook() -> dict[str, Any]:
    """A NovelAI ``.lorebook``: entries with ``text`` and ``displayName``."""
    return {
        "lorebookVersion": 5,
        "entries": [
            {
                "text": "The harbour freezes in winter.",
                "keys": ["harbour"],
                "displayName": "Harbour",
                "enabled": True,
                "contextConfig": {"budgetPriority": 400},
            },
            {"text": "Unused.", "keys": ["attic"], "displayName": "Attic", "enabled": False},
        ],
        "settings": {"orderByKeyLocations": False},
    }


def agnai_memory_book() -> dict[str, Any]:
    """An Agnai memory book: ``kind: memory``, entries with ``keywords`` and ``entry``."""
    return {
        "kind": "memory",
        "name": "Harbour town",
        "description": "",
        "entries": [
            {
                "name": "Harbour",
                "entry": "The harbour freezes in winter.",
                "keywords": ["harbour"],
                "priority": 1,
                "weight": 7,
                "enabled": True,
            }
        ],
    }


def risu_lorebook() -> dict[str, Any]:
    """A RisuAI lorebook export: ``type: risu``, keys as one comma-separated text."""
    return {
        "type": "risu",
        "ver": 1,
        "data": [
            {
                "key": "harbour, port",
                "secondkey": "",
                "comment": "Harbour",
                "content": "The harbour freezes in winter.",
                "mode": "normal",
                "insertorder": 100,
                "alwaysActive": False,
                "selective": False,
            },
            {
                "key": "",
                "secondkey": "",
                "comment": "Always",
                "content": "Gulls everywhere.",
                "mode": "normal",
                "insertorder": 90,
                "alwaysActive": True,
                "selective": False,
            },
        ],
    }
