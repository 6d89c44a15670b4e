"""/admin partner import|export and /admin lore in the owner's DM."""

from __future__ import annotations

import json
import os
import time

from partners.card_format import read_card
from tests import card_fixtures as cards
from tests.admin_support import admin, admin_messages, partner_dir, say
from tests.conftest import Harness
from tests.test_lore import entry


async def test_an_import_waits_for_the_owner_and_card_text_is_shown_literally(
    harness: Harness,
) -> None:
    raw = cards.png(cards.v2(cards.card_data(name="*Bold* Kai")))
    answer = await admin(harness, "/admin partner import kai", attachment=("kai.png", raw))
    assert r"\*Bold\* Kai" in answer
    assert harness.app.catalog.get("kai") is None
    token = answer.split("/admin partner import confirm ")[1].split()[0]
    created = await admin(harness, f"/admin partner import confirm {token}")
    assert created.startswith(r"Created \*Bold\* Kai (kai)")
    assert harness.app.catalog.require("kai").name == "*Bold* Kai"
    again = await admin(harness, f"/admin partner import confirm {token}")
    assert "no card waits" in again


async def test_an_imported_partner_is_private_and_the_preview_says_so(harness: Harness) -> None:
    card = ("s.png", cards.png(cards.v2()))
    answer = await admin(harness, "/admin partner import", attachment=card)
    assert "private: only you can pick it until /admin partner set sirin public true" in (
        answer.replace("\\", "")
    )
    token = answer.split("/admin partner import confirm ")[1].split()[0]
    await admin(harness, f"/admin partner import confirm {token}")
    assert harness.app.catalog.require("sirin").preset.public is False
    assert "sirin" not in [p.id for p in harness.app.catalog.public()]


async def test_import_without_a_file_says_how_to_send_one(harness: Harness) -> None:
    answer = await admin(harness, "/admin partner import")
    assert "as a file" in answer and "not as a photo" in answer


async def test_export_sends_a_v3_card_of_the_partner(harness: Harness) -> None:
    await admin_messages(harness, "/admin partner export example --card json")
    [(_, name, data, caption)] = harness.channel.files
    assert caption.startswith("Mira as a V3 character card")
    assert name == "example.json"
    assert read_card(data).data["name"] == "Mira"


async def test_lore_lists_entries_and_what_fired_on_the_last_turn(harness: Harness) -> None:
    book = {
        "entries": [
            entry(["lighthouse"], "Oren keeps the light.", comment="Oren"),
            entry(["harbour"], "Boats come at dawn.", comment="Harbour"),
        ]
    }
    (partner_dir(harness) / "lorebook.json").write_text(json.dumps(book), encoding="utf-8")
    await say(harness, 42, "who keeps the lighthouse?", "Oren does.")
    answer = await admin(harness, "/admin lore example")
    assert "2 entries" in answer and "fired Oren" in answer
    assert "Boats come at dawn" in answer
    found = await admin(harness, "/admin lore example boats")
    assert "1 matching" in found and "Oren keeps" not in found


async def test_names_and_descriptions_from_a_card_are_shown_literally(harness: Harness) -> None:
    data = cards.card_data(name="_Under_ *Star*", description="[click](https://x.example)")
    raw = cards.as_json(cards.v2(data))
    answer = await admin(harness, "/admin partner import star", attachment=("s.json", raw))
    token = answer.split("/admin partner import confirm ")[1].split()[0]
    await admin(harness, f"/admin partner import confirm {token}")
    listing = await admin(harness, "/admin partners")
    assert r"\_Under\_ \*Star\* (star) — \[click\]\(https://x.example\)" in listing
    shown = await admin(harness, "/admin partner show star")
    assert shown.startswith(r"\_Under\_ \*Star\* (star)")


async def test_owner_edits_post_history_instructions_which_follow_the_next_message(
    harness: Harness,
) -> None:
    answer = await admin(harness, "/admin partner edit example POST_HISTORY.md")
    assert "POST_HISTORY.md of Mira is empty" in answer
    put = answer.split("caption ")[-1].strip()
    saved = await admin(harness, put, attachment=("POST_HISTORY.md", b"Reply as {{char}}.\n"))
    assert saved.startswith("Saved POST_HISTORY.md")
    await say(harness, 42, "hello", "hi")
    last = harness.llm.requests[-1]["messages"]
    assert last[-1]["content"] == "Reply as Mira."
    assert "Reply as" not in last[0]["content"]


async def test_lore_names_the_entries_left_out_of_a_stored_book(harness: Harness) -> None:
    book = {
        "entries": [
            {**entry([], "Bad.", comment="Broken"), "keys": 5},
            entry(["harbour"], "Boats come at dawn.", comment="Harbour"),
        ]
    }
    (partner_dir(harness) / "lorebook.json").write_text(json.dumps(book), encoding="utf-8")
    answer = await admin(harness, "/admin lore example")
    assert "1 entries" in answer and "Boats come at dawn" in answer
    assert r"entry 1 \('Broken'\): 'keys' should be a list of texts, not a number" in answer


async def test_lore_says_why_a_stored_book_is_not_used(harness: Harness) -> None:
    (partner_dir(harness) / "lorebook.json").write_text('{"entries": 5}', encoding="utf-8")
    answer = await admin(harness, "/admin lore example")
    assert answer.startswith("Mira's lorebook is not used:")
    assert "should be an object with a list of 'entries'" in answer


async def test_a_deeply_nested_card_gets_one_line_and_nothing_is_staged(harness: Harness) -> None:
    raw = cards.deep_card(100_000)
    answer = await admin(harness, "/admin partner import", attachment=("deep.json", raw))
    assert "deep.json: JSON nested deeper than 64 levels" in answer and "\n" not in answer
    assert not (harness.config.data_dir / "imports").exists()


async def test_a_card_staged_more_than_a_day_ago_cannot_be_confirmed(harness: Harness) -> None:
    raw = cards.as_json(cards.v2())
    answer = await admin(harness, "/admin partner import old", attachment=("old.json", raw))
    token = answer.split("/admin partner import confirm ")[1].split()[0]
    staging = harness.config.data_dir / "imports"
    three_days_ago = time.time() - 3 * 24 * 3600
    for staged in staging.iterdir():
        os.utime(staged, (three_days_ago, three_days_ago))
    again = await admin(harness, f"/admin partner import confirm {token}")
    assert again == "That import expired (cards wait a day); send the card again."
    assert harness.app.catalog.get("old") is None
    assert list(staging.iterdir()) == []
