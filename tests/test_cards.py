"""Character cards in and out of partner directories: mapping, round trip, refusals."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image
from PIL.PngImagePlugin import PngImageFile

from partners.card_format import MAX_CARD_FILE_BYTES, CardError, read_card
from partners.cards import export_card, plan_import, write_import
from partners.catalog import PartnerCatalog
from partners.persona import PartnerError, PromptContext, assemble_prompt
from tests import card_fixtures as cards


def imported(root: Path, raw: bytes, name: str = "card.png", partner_id: str | None = None) -> Path:
    return write_import(plan_import(raw, name, partner_id, root), root)


def files_of(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def prompt_of(root: Path, partner_id: str) -> str:
    catalog = PartnerCatalog(root)
    catalog.reload()
    partner = catalog.require(partner_id)
    context = PromptContext(user="Ana", session="s", platform="test")
    return assemble_prompt(partner, context, budget=10**7, notice=False).text


def test_a_v2_png_card_becomes_a_partner_directory(tmp_path: Path) -> None:
    directory = imported(tmp_path, cards.png(cards.v2()), partner_id="sirin")
    assert (directory / "IDENTITY.md").read_text(encoding="utf-8") == (
        "{{partner}} is a lighthouse painter who talks to {{user}} kindly."
    )
    assert (directory / "SOUL.md").read_text(encoding="utf-8") == "Warm, curious, a little shy."
    assert (directory / "SCENARIO.md").read_text(encoding="utf-8") == (
        "{{user}} visits {{partner}}'s studio by the sea."
    )
    assert "{{original}}" not in (directory / "SYSTEM.md").read_text(encoding="utf-8")
    side = json.loads((directory / "card.json").read_text(encoding="utf-8"))
    assert side["first_mes"].endswith("I'm {{partner}}.")
    assert side["extensions"]["depth_prompt"] == {"prompt": "x", "depth": 4}
    assert side["creator_notes"].endswith("SECRET-CREATOR-NOTE")
    avatar = (directory / "avatar.png").read_bytes()
    assert avatar.startswith(b"\x89PNG") and b"chara" not in avatar
    catalog = PartnerCatalog(tmp_path)
    catalog.reload()
    assert catalog.require("sirin").name == "Ŝirin 🌙"


def test_the_prompt_has_the_persona_and_never_the_creator_notes(tmp_path: Path) -> None:
    imported(tmp_path, cards.png(cards.v2()), partner_id="sirin")
    prompt = prompt_of(tmp_path, "sirin")
    assert "Ŝirin 🌙 is a lighthouse painter who talks to Ana kindly." in prompt
    assert "Hello there!" in prompt  # the example dialogue
    assert "SECRET-CREATOR-NOTE" not in prompt
    assert "Stay in character" not in prompt  # post-history goes after the history, per turn


@pytest.mark.parametrize(
    ("raw", "spec"),
    [
        (cards.as_json(cards.v1()), "V1"),
        (cards.as_json(cards.v2()), "V2"),
        (cards.as_json(cards.v3()), "V3"),
        (cards.png(cards.v3(), keyword="ccv3"), "V3 PNG"),
    ],
)
def test_every_spec_version_reads(tmp_path: Path, raw: bytes, spec: str) -> None:
    plan = plan_import(raw, "card", "c", tmp_path)
    assert plan.spec == spec
    assert plan.name == "Ŝirin 🌙"


def test_a_v3_png_prefers_ccv3_over_the_v2_copy(tmp_path: Path) -> None:
    v3 = cards.v3(cards.card_data(name="Three"))
    raw = cards.png(cards.v2(cards.card_data(name="Two")))
    both = export_card(imported(tmp_path, raw, partner_id="two"), as_png=True)
    assert read_card(both).data["name"] == "Two"
    assert read_card(cards.png(v3, keyword="ccv3")).data["name"] == "Three"


def test_round_trip_gives_byte_identical_partner_files(tmp_path: Path) -> None:
    data = cards.card_data(
        description="line one\r\nline two\r\n" + "長い説明。" * 70_000,  # CRLF, 1 MB of UTF-8
    )
    document = cards.v3(data)
    document["data"]["character_book"] = cards.book(500)
    first = imported(tmp_path, cards.png(document, keyword="ccv3"), partner_id="first")
    assert len((first / "IDENTITY.md").read_bytes()) > 1_000_000
    assert b"\r\nline two\r\n" in (first / "IDENTITY.md").read_bytes()
    again = imported(tmp_path, export_card(first, as_png=True), "out.png", "second")
    assert files_of(again) == files_of(first)
    # a JSON card has no image to carry the avatar in; everything else comes back
    again = imported(tmp_path, export_card(first, as_png=False), "out.json", "third")
    expected = {k: v for k, v in files_of(first).items() if k != "avatar.png"}
    assert files_of(again) == expected
    assert len(json.loads((first / "lorebook.json").read_text("utf-8"))["entries"]) == 500


def test_an_export_is_a_v3_card_with_v2_fields_for_old_readers(tmp_path: Path) -> None:
    directory = imported(tmp_path, cards.png(cards.v3(), keyword="ccv3"), partner_id="sirin")
    exported = Image.open(io.BytesIO(export_card(directory, as_png=True)))
    assert isinstance(exported, PngImageFile)
    text_chunks = exported.text
    v2 = json.loads(base64.b64decode(text_chunks["chara"]))
    v3 = json.loads(base64.b64decode(text_chunks["ccv3"]))
    assert v3["spec"] == "chara_card_v3" and v3["data"]["character_book"]["entries"]
    assert v2["spec"] == "chara_card_v2" and v2["data"]["first_mes"].endswith("I'm {{char}}.")
    assert "character_book" in v2["data"]
    card = json.loads(export_card(directory, as_png=False))
    assert card["spec"] == "chara_card_v3" and card["spec_version"] == "3.0"
    assert card["data"]["description"].startswith("{{char}} is a lighthouse painter")


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (cards.png_with_raw_text("chara", b"not base64!!"), "not valid base64"),
        (cards.png(cards.v2())[:-30], "truncated PNG"),
        (cards.png({"spec": "chara_card_v4", "spec_version": "4.0", "data": {}}), "unsupported"),
        (cards.png(cards.v2(), compressed=True), "zTXt"),
        (cards.png(None), "without a character card"),
        (b'{"spec": "chara_card_v2", "data": ', "invalid JSON"),
        (cards.as_json({"spec": "chara_card_v2", "spec_version": "2.0", "data": []}), "'data'"),
        (cards.as_json(cards.v2(cards.card_data(tags="sea"))), "'tags'"),
        (b"PK\x03\x04rest", "CHARX"),
        (cards.deep_card(100_000), "nested deeper than 64 levels"),
        (cards.png_with_raw_text("chara", base64.b64encode(cards.deep_card(100))), "deeper"),
        (b"\x89PNG\r\n\x1a\n" + b"\0" * (MAX_CARD_FILE_BYTES), "over the limit"),
    ],
)
def test_bad_cards_get_one_line_and_write_nothing(tmp_path: Path, raw: bytes, said: str) -> None:
    root = tmp_path / "partners"
    root.mkdir()
    with pytest.raises(CardError) as caught:
        imported(root, raw, "bad.png", "bad")
    message = str(caught.value)
    assert said in message and "\n" not in message and message.startswith("bad.png")
    assert list(root.iterdir()) == []


def test_an_existing_partner_is_never_overwritten(tmp_path: Path) -> None:
    first = imported(tmp_path, cards.as_json(cards.v2()), "a.json", "sirin")
    before = files_of(first)
    with pytest.raises(CardError, match="exists already"):
        imported(tmp_path, cards.as_json(cards.v1()), "b.json", "sirin")
    assert files_of(first) == before


def test_the_summary_names_sizes_lore_and_what_was_not_mapped(tmp_path: Path) -> None:
    plan = plan_import(cards.png(cards.v3(), keyword="ccv3"), "c.png", None, tmp_path)
    summary = "\n".join(plan.summary())
    assert plan.partner_id == "sirin"  # from the name, accents folded away
    assert "lorebook entries: 2" in summary
    assert "greetings: 3" in summary
    identity = "{{partner}} is a lighthouse painter who talks to {{user}} kindly."
    assert f"IDENTITY.md {len(identity)}" in summary
    assert "extensions (talkativeness)" in summary
    assert "{{original}}" in summary


def test_a_hand_made_partner_exports_its_persona_and_nothing_of_its_memory(
    tmp_path: Path,
) -> None:
    catalog = PartnerCatalog(tmp_path)
    mira = catalog.create("mira", "Mira")
    (mira.dir / "AGENTS.md").write_text("Answer briefly.", encoding="utf-8")
    (mira.dir / "MEMORY.md").write_text("- PRIVATE-MEMORY-LINE\n", encoding="utf-8")
    (mira.dir / "USER.md").write_text("PRIVATE-USER-NOTE", encoding="utf-8")
    exported = export_card(mira.dir, as_png=True)
    data = read_card(exported).data
    assert data["name"] == "Mira" and data["system_prompt"].endswith("Answer briefly.")
    assert "PRIVATE" not in json.dumps(data)


@pytest.mark.parametrize("bad", ["sirin\n", "sirin\r\n", "\nsirin"])
def test_an_id_with_a_line_break_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(PartnerError, match="not a valid partner id"):
        plan_import(cards.as_json(cards.v2()), "c.json", bad, tmp_path)
