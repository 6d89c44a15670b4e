"""Cards and lorebooks as other apps write them, read as SillyTavern reads them: which chunk
of a PNG holds the card, V1's extra fields, a byte-order mark before the JSON."""

from __future__ import annotations

import json
from pathlib import Path

from bot.cli.cards import lore_from_file
from partners.card_format import read_card
from partners.cards import plan_import
from tests import card_fixtures as cards


def test_of_two_chara_chunks_the_first_is_read() -> None:
    first = cards.v2(cards.card_data(name="First"))
    second = cards.v2(cards.card_data(name="Second"))
    raw = cards.png_with_chunks(("chara", first), ("chara", second))
    assert read_card(raw).data["name"] == "First"


def test_ccv3_is_preferred_wherever_it_is_and_keywords_ignore_case() -> None:
    v2 = cards.v2(cards.card_data(name="Old"))
    v3 = cards.v3(cards.card_data(name="New"))
    assert read_card(cards.png_with_chunks(("chara", v2), ("ccv3", v3))).data["name"] == "New"
    assert read_card(cards.png_with_chunks(("Chara", v2))).data["name"] == "Old"
    image = read_card(cards.png_with_chunks(("CHARA", v2))).image
    assert image is not None and b"CHARA" not in image


def test_a_v1_card_keeps_every_top_level_field(tmp_path: Path) -> None:
    document = {**cards.v1(), "creator_notes": "by me", "tags": ["sea"], "talkativeness": "0.5"}
    data = read_card(cards.as_json(document)).data
    assert data["creator_notes"] == "by me" and data["tags"] == ["sea"]
    assert data["talkativeness"] == "0.5"
    plan = plan_import(cards.as_json(document), "v1.json", "v1", tmp_path)
    assert json.loads(plan.files["card.json"])["talkativeness"] == "0.5"


def test_json_with_a_byte_order_mark_is_read_everywhere() -> None:
    bom = b"\xef\xbb\xbf"
    assert read_card(bom + cards.as_json(cards.v2())).data["name"] == cards.card_data()["name"]
    world = {"entries": {"0": {"uid": 0, "key": ["harbour"], "content": "Boats."}}}
    book = lore_from_file(bom + json.dumps(world).encode(), "world.json")
    assert [e.content for e in book.entries] == ["Boats."]
    card_book = lore_from_file(bom + cards.as_json(cards.v3()), "card.json")
    assert len(card_book.entries) == 2


def test_the_picker_line_is_the_description_never_the_creator_notes(tmp_path: Path) -> None:
    data = cards.card_data(
        description="\n  {{char}} paints   lighthouses for {{user}}.\nMore.",
        creator_notes="<div><style>.x{}</style>",
    )
    plan = plan_import(cards.as_json(cards.v2(data)), "c.json", "p", tmp_path)
    preset = plan.files["preset.yml"].decode()
    assert 'description: "Ŝirin 🌙 paints lighthouses for you."' in preset
    assert "style" not in preset


def test_the_picker_line_passes_over_a_markdown_heading(tmp_path: Path) -> None:
    """A card this project exported (its description is IDENTITY.md), and many others, open
    the description with a heading: the picker shows the first line of text after it."""
    data = cards.card_data(description="# Identity\n\nA lighthouse keeper who loves storms.")
    preset = plan_import(cards.as_json(cards.v2(data)), "c.json", "p", tmp_path).files["preset.yml"]
    assert 'description: "A lighthouse keeper who loves storms."' in preset.decode()
    only_heading = cards.card_data(description="## The keeper")
    plan = plan_import(cards.as_json(cards.v2(only_heading)), "c.json", "q", tmp_path)
    assert 'description: "The keeper"' in plan.files["preset.yml"].decode()
