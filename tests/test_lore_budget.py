"""What a turn's lorebook entries may take, measured as SillyTavern measures it: a share of
the model's context, at most a cap, entries that ignore the budget always in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.turn.chat import TurnInput, build_messages
from partners.cards import plan_import, write_import
from partners.catalog import PartnerCatalog
from partners.lore import LORE_FRAME, Lorebook
from partners.lore_books import LoreBudget, LoreLibrary
from partners.world_info import from_world_info
from tests import card_fixtures as cards
from tests.admin_support import admin, partner_dir
from tests.conftest import Harness
from tests.test_lore import entry, fired


def test_a_card_whose_world_is_all_large_entries_gets_them_into_the_turn(tmp_path: Path) -> None:
    data = cards.card_data(system_prompt="", character_book=cards.large_world_book())
    plan = plan_import(cards.as_json(cards.v2(data)), "c.json", "world", tmp_path)
    assert not [note for note in plan.notes if "never fits" in note]
    write_import(plan, tmp_path)
    catalog = PartnerCatalog(tmp_path)
    catalog.reload()
    note = LoreLibrary().turn_note(catalog.require("world"), ["去灯塔1看看"], "Ana", "c", 0.0)
    assert note.startswith(LORE_FRAME)
    assert "第0条" in note and "第1条" in note  # the constant entry and the keyed one


def test_the_budget_is_a_share_of_the_context_under_a_cap(tmp_path: Path) -> None:
    assert LoreBudget().tokens() == 2048  # 25 % of 8,192
    assert LoreBudget(context_tokens=4000, percent=10).tokens() == 400
    assert LoreBudget(context_tokens=10**6).tokens() == 8000
    assert LoreBudget(context_tokens=10**6, cap=0).tokens() == 250_000
    data = cards.card_data(character_book=cards.book())
    write_import(plan_import(cards.as_json(cards.v2(data)), "c.json", "own", tmp_path), tmp_path)
    preset = tmp_path / "own" / "preset.yml"
    preset.write_text(preset.read_text(encoding="utf-8") + "context_tokens: 32000\n", "utf-8")
    catalog = PartnerCatalog(tmp_path)
    catalog.reload()
    assert LoreBudget(context_tokens=8192).tokens(catalog.require("own")) == 8000


def big(text: str, **fields: Any) -> dict[str, Any]:
    return entry(["a"], "x" * 400 + text, **fields)  # a little over 100 tokens


def test_past_the_budget_later_entries_stay_out_but_those_ignoring_it_come() -> None:
    book = {
        "entries": [
            big("one", insertion_order=1),
            big("two", insertion_order=2),
            entry(["a"], "small", insertion_order=3),
            big("free", insertion_order=4, extensions={"ignore_budget": True}),
        ]
    }
    # "two" reaches the budget: it stays out and so does "small", which alone would fit
    assert [c.removeprefix("x" * 400) for c in fired(book, "a", budget=150)] == ["one", "free"]


def test_world_info_ignore_budget_is_carried_into_the_book() -> None:
    world = {"entries": {"0": {"uid": 0, "key": ["a"], "content": "y" * 900, "ignoreBudget": True}}}
    book = from_world_info(world, "w.json").book
    assert book["entries"][0]["extensions"]["ignore_budget"] is True
    assert fired(book, "a", budget=10) == ["y" * 900]


def test_an_entry_that_can_never_fit_is_named_at_import(tmp_path: Path) -> None:
    huge = {"entries": [entry(["a"], "z" * 40_000, comment="Atlas"), entry(["b"], "small")]}
    data = cards.card_data(character_book=huge)
    plan = plan_import(cards.as_json(cards.v2(data)), "c.json", "c", tmp_path, 2048)
    assert "entry 'Atlas' (10,000 tokens) never fits the budget of 2,048 tokens; " in "\n".join(
        plan.notes
    )
    assert Lorebook(huge).too_large(20_000) == []


async def test_admin_lore_names_an_entry_that_can_never_fit(harness: Harness) -> None:
    book = {"entries": [entry(["a"], "z" * 40_000, comment="Atlas"), entry(["b"], "small")]}
    (partner_dir(harness) / "lorebook.json").write_text(json.dumps(book), encoding="utf-8")
    answer = await admin(harness, "/admin lore example")
    assert "budget 2,048 tokens" in answer
    assert "Atlas" in answer and "never fits the budget of 2,048 tokens" in answer


def test_an_empty_system_prompt_sends_no_system_message() -> None:
    messages = build_messages(TurnInput(system_prompt=" ", history=(), new_messages=()))
    assert not [m for m in messages if m["role"] == "system"]
