"""`companion lore import` of every lorebook shape SillyTavern reads, a file of none of them
refused naming what was expected, and a world imported again replacing itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.cli.cards import lore_from_file
from partners.card_format import CardError
from partners.lore import Lorebook
from partners.world_info import EXPECTED_SHAPES
from tests import card_fixtures as cards
from tests.test_cli_cards import run, with_partner, write_config


def loaded(document: dict[str, Any]) -> Lorebook:
    return Lorebook(lore_from_file(json.dumps(document).encode(), "book.json").book)


def fired(book: Lorebook, text: str) -> list[str]:
    return [entry.content for entry in book.fire([text]).entries]


def test_a_novelai_lorebook_becomes_a_character_book() -> None:
    book = loaded(cards.novelai_lorebook())
    assert [(e.label, e.keys, e.enabled) for e in book.entries] == [
        ("Harbour", ("harbour",), True),
        ("Attic", ("attic",), False),
    ]
    assert book.entries[0].order == 400
    assert fired(book, "the harbour at dawn") == ["The harbour freezes in winter."]


def test_an_agnai_memory_book_becomes_a_character_book() -> None:
    book = loaded(cards.agnai_memory_book())
    assert book.name == "Harbour town"
    assert (book.entries[0].label, book.entries[0].order) == ("Harbour", 7)
    assert fired(book, "the harbour") == ["The harbour freezes in winter."]


def test_a_risuai_lorebook_becomes_a_character_book() -> None:
    book = loaded(cards.risu_lorebook())
    assert book.entries[0].keys == ("harbour", "port")
    assert book.entries[1].constant
    assert fired(book, "the port") == ["Gulls everywhere.", "The harbour freezes in winter."]


@pytest.mark.parametrize(
    "document",
    [
        {"entries": [{"text": "NovelAI-like, without its version", "keys": ["a"]}]},
        {"entries": 5},
        {"name": "no entries"},
        {"type": "risu", "data": "x"},
    ],
)
def test_a_file_of_no_known_shape_is_refused_naming_what_was_expected(
    document: dict[str, Any],
) -> None:
    with pytest.raises(CardError) as caught:
        lore_from_file(json.dumps(document).encode(), "book.json")
    assert str(caught.value).startswith("book.json: ")
    assert "RisuAI" in str(caught.value)
    if "type" not in document:
        assert str(caught.value).endswith(f"expected {EXPECTED_SHAPES}")


def test_importing_a_world_again_replaces_it_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    partner = with_partner(tmp_path, config)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"entries": {"0": {"key": ["x"], "content": "Other."}}}), "utf-8")
    assert run(config, "lore", "import", str(other), partner) == 0
    world = tmp_path / "town.json"
    entries = {"0": {"uid": 0, "key": ["harbour"], "content": "Boats."}}
    world.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    assert run(config, "lore", "import", str(world), partner) == 0
    entries["1"] = {"uid": 1, "key": ["gate"], "content": "The gate."}
    world.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    capsys.readouterr()
    assert run(config, "lore", "import", str(world), partner) == 0
    assert "replaced the 1 entries of 'town'" in capsys.readouterr().out
    stored = tmp_path / "data" / "partners" / partner / "lorebook.json"
    contents = [e["content"] for e in json.loads(stored.read_text())["entries"]]
    assert contents == ["Other.", "Boats.", "The gate."]
