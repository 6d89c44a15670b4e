"""Lorebooks checked where they come in: a card's character_book, a SillyTavern world-info file
and lorebook.json as it is loaded. Nulls take defaults, a lone key is a list of one, a bad entry
is left out with a note that names it, a book whose own settings are wrong is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partners.card_format import CardError
from partners.cards import plan_import
from partners.lore import Lorebook, estimate_tokens
from partners.lore_books import LoreBudget
from partners.lore_format import MAX_TOKEN_BUDGET
from partners.world_info import from_world_info
from tests import card_fixtures as cards
from tests.test_lore import entry, fired


def card_with_book(book: dict[str, Any]) -> bytes:
    document = cards.v3()
    document["data"]["character_book"] = book
    return cards.as_json(document)


def test_null_keys_and_extensions_take_their_defaults() -> None:
    book = {
        "entries": [
            entry(["harbour"], "Boats.", extensions=None, secondary_keys=None, priority=None),
            {**entry([], "never", enabled=None), "keys": None},
        ]
    }
    assert fired(book, "the harbour at dawn") == ["Boats."]


def test_a_world_info_key_given_as_text_is_one_key() -> None:
    world = {"entries": {"0": {"uid": 0, "key": "dragon", "content": "Scales."}}}
    book = from_world_info(world, "world.json").book
    assert book["entries"][0]["keys"] == ["dragon"]
    assert fired(book, "a dragon flew by") == ["Scales."]
    assert fired(book, "a rag on the door") == []


def test_a_book_entry_with_a_bad_field_is_left_out_with_a_note_naming_it(
    tmp_path: Path,
) -> None:
    bad = {**entry([], "The gate.", id=7, comment="Castle\ngate"), "keys": 5}
    book = {"entries": [entry(["harbour"], "Boats."), bad]}
    plan = plan_import(card_with_book(book), "c.json", "c", tmp_path)
    assert plan.lore_entries == 1
    [note] = [n for n in plan.notes if "left out" in n]
    assert note == (
        "c.json: character_book: entry 2 (id 7, 'Castle gate'): 'keys' should be a list "
        "of texts, not a number; left out"
    )


def test_a_world_info_entry_with_a_bad_field_is_left_out_with_a_note_naming_it() -> None:
    world = {
        "entries": {
            "3": {"uid": 3, "key": ["harbour"], "content": "Boats."},
            "7": {"uid": 7, "key": ["gate"], "comment": "Castle", "content": {"text": "x"}},
        }
    }
    checked = from_world_info(world, "world.json")
    assert [e["content"] for e in checked.book["entries"]] == ["Boats."]
    assert checked.notes == (
        "world.json: entry 2 (uid 7, 'Castle'): 'content' should be text, not an object; left out",
    )


def test_a_book_whose_own_settings_are_wrong_is_refused_in_one_line(tmp_path: Path) -> None:
    book = {"token_budget": "lots", "entries": [entry(["harbour"], "Boats.")]}
    with pytest.raises(CardError) as caught:
        plan_import(card_with_book(book), "c.json", "c", tmp_path)
    assert str(caught.value) == (
        "c.json: character_book: 'token_budget' should be a number, not 'lots'; fix the book "
        "and import it again"
    )


def test_numbers_written_as_text_or_whole_floats_are_numbers() -> None:
    book = {
        "scan_depth": "3",
        "token_budget": None,
        "entries": [entry(["a"], "ok", insertion_order="7", extensions={"probability": 50.0})],
    }
    loaded = Lorebook(book)
    assert loaded.scan_depth == 3
    assert (loaded.entries[0].order, loaded.entries[0].probability) == (7, 50)


def test_an_entry_whose_number_is_nonsense_is_left_out_and_the_rest_kept() -> None:
    book = {"entries": [entry(["a"], "bad", insertion_order="x"), entry(["a"], "good")]}
    loaded = Lorebook(book, "lorebook.json")
    assert [e.content for e in loaded.entries] == ["good"]
    assert loaded.notes == (
        "lorebook.json: entry 1 ('a'): 'insertion_order' should be a number, not 'x'; left out",
    )


def test_the_stored_book_keeps_what_front_ends_wrote_and_fills_only_nulls(
    tmp_path: Path,
) -> None:
    written = entry(["a"], "text", extensions=None, display_index=4)
    plan = plan_import(card_with_book({"entries": [written]}), "c.json", "c", tmp_path)
    assert b'"display_index": 4' in plan.files["lorebook.json"]
    assert b'"extensions": {}' in plan.files["lorebook.json"]


def test_a_books_own_token_budget_is_kept_and_does_not_limit_a_turn(tmp_path: Path) -> None:
    entries = [entry(["harbour"], f"{i} " + "tide " * 200) for i in range(4)]  # 250 tokens each
    book = {"token_budget": 10, "entries": entries}
    plan = plan_import(card_with_book(book), "c.json", "c", tmp_path)
    assert json.loads(plan.files["lorebook.json"])["token_budget"] == 10
    assert not [note for note in plan.notes if "token_budget" in note]
    assert len(Lorebook(book).fire(["the harbour"], budget=2048).entries) == 4


def test_what_fires_stays_within_the_cap_however_large_the_context() -> None:
    entries = [entry(["harbour"], f"{i} " + "tide " * 2_000) for i in range(40)]
    book = Lorebook({"token_budget": 10**9, "entries": entries})
    budget = LoreBudget(context_tokens=10**7).tokens()
    assert budget == MAX_TOKEN_BUDGET
    text = book.fire(["the harbour"], budget=budget).text
    assert MAX_TOKEN_BUDGET // 2 < estimate_tokens(text) <= MAX_TOKEN_BUDGET


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
FIELDS = st.sampled_from(
    [
        "keys",
        "secondary_keys",
        "content",
        "extensions",
        "enabled",
        "insertion_order",
        "priority",
        "position",
        "constant",
        "selective",
        "case_sensitive",
        "match_whole_words",
        "name",
        "comment",
        "id",
    ]
)
EXTENSIONS = st.dictionaries(
    st.sampled_from(
        ["probability", "useProbability", "selectiveLogic", "position", "exclude_recursion"]
    ),
    JSON,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(
        st.dictionaries(FIELDS, JSON) | st.dictionaries(FIELDS, EXTENSIONS) | JSON, max_size=4
    ),
    recursive=st.none() | st.booleans(),
)
def test_whatever_an_entry_holds_a_loaded_book_fires_without_failing(
    entries: list[Any], recursive: Any
) -> None:
    book = {"recursive_scanning": recursive, "entries": [*entries, entry(["k"], "kept")]}
    try:
        loaded = Lorebook(book)
    except CardError:
        return  # the book's own setting is wrong: refused whole, in one line
    assert "kept" in [e.content for e in loaded.fire(["a b 0", "k"], lambda: 0.5).entries]
