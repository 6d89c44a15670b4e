"""Lorebooks: which entries a conversation brings in, and where they go in the turn."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from partners.lore import (
    DEFAULT_BUDGET,
    LORE_FRAME,
    MAX_RECURSION_STEPS,
    Lorebook,
    estimate_tokens,
)
from partners.lore_format import MAX_KEY_CHARS
from partners.world_info import from_world_info
from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Reply


def entry(keys: list[str], content: str, **fields: Any) -> dict[str, Any]:
    return {"keys": keys, "content": content, "insertion_order": 100, **fields}


def fired(
    book: dict[str, Any], *messages: str, chance: float = 0.0, budget: int = DEFAULT_BUDGET
) -> list[str]:
    found = Lorebook(book).fire(list(messages), lambda: chance, budget)
    return [e.content for e in found.entries]


def test_a_key_fires_its_entry_folding_case_and_accents() -> None:
    book = {"entries": [entry(["Café Noir"], "the bar"), entry(["dragon"], "dragons")]}
    assert fired(book, "we met at the CAFE NOIR yesterday") == ["the bar"]


def test_keys_match_whole_words_unless_the_entry_says_otherwise() -> None:
    book = {"entries": [entry(["cat"], "cats")]}
    assert fired(book, "what category is it") == []
    assert fired(book, "a cat!") == ["cats"]
    loose = {"entries": [entry(["cat"], "cats", extensions={"match_whole_words": False})]}
    assert fired(loose, "what category is it") == ["cats"]


def test_case_sensitive_entries_need_the_exact_case() -> None:
    book = {"entries": [entry(["May"], "the month", case_sensitive=True)]}
    assert fired(book, "you may go") == []
    assert fired(book, "in May") == ["the month"]


def test_cjk_keys_match_inside_a_sentence() -> None:
    book = {"entries": [entry(["東京"], "capital"), entry(["猫"], "cat")]}
    assert fired(book, "明日は東京へ行きます") == ["capital"]
    assert fired(book, "我家的猫很胖") == ["cat"]


def test_selective_logic_on_secondary_keys() -> None:
    def book(logic: int) -> dict[str, Any]:
        return {
            "entries": [
                entry(
                    ["castle"],
                    "hit",
                    selective=True,
                    secondary_keys=["king", "queen"],
                    extensions={"selectiveLogic": logic},
                )
            ]
        }

    text = "the castle and its king"
    assert fired(book(0), text) == ["hit"]  # AND ANY
    assert fired(book(0), "the castle") == []
    assert fired(book(1), text) == ["hit"]  # NOT ALL: the queen is missing
    assert fired(book(1), "castle king queen") == []
    assert fired(book(2), text) == []  # NOT ANY
    assert fired(book(2), "the castle") == ["hit"]
    assert fired(book(3), text) == []  # AND ALL
    assert fired(book(3), "castle king queen") == ["hit"]


def test_scan_depth_limits_how_far_back_keys_are_seen() -> None:
    book = {"scan_depth": 2, "entries": [entry(["dragon"], "dragons")]}
    assert fired(book, "a dragon", "hello", "how are you") == []
    assert fired(book, "a dragon", "hello") == ["dragons"]


def test_constant_entries_always_come_and_disabled_ones_never() -> None:
    book = {
        "entries": [
            entry([], "always", constant=True),
            entry(["dragon"], "never", enabled=False),
        ]
    }
    assert fired(book, "a dragon") == ["always"]


def test_the_budget_keeps_constant_then_higher_priority_entries() -> None:
    big = "x" * 400  # 100 tokens
    book = {
        "entries": [
            entry(["a"], big + "low", priority=1),
            entry(["a"], big + "high", priority=9),
            entry([], big + "constant", constant=True),
        ],
    }
    assert [c.removeprefix(big) for c in fired(book, "a", budget=250)] == ["high", "constant"]


def test_entries_are_ordered_by_position_then_insertion_order() -> None:
    book = {
        "entries": [
            entry(["a"], "after", position="after_char", insertion_order=1),
            entry(["a"], "second", insertion_order=20),
            entry(["a"], "first", insertion_order=10),
        ]
    }
    assert fired(book, "a") == ["first", "second", "after"]


def test_recursion_follows_entry_text_within_the_limit() -> None:
    chain = [entry([f"k{i}"], f"see k{i + 1}") for i in range(6)]
    book = {"recursive_scanning": True, "entries": chain}
    assert fired(book, "k0") == ["see k1", "see k2", "see k3", "see k4"]  # 3 steps past the first
    assert fired({"entries": chain}, "k0") == ["see k1"]


def test_probability_rolls_for_each_entry() -> None:
    book = {"entries": [entry(["a"], "maybe", extensions={"probability": 30})]}
    assert fired(book, "a", chance=0.29) == ["maybe"]
    assert fired(book, "a", chance=0.30) == []


def test_sillytavern_world_info_converts_to_a_character_book() -> None:
    world = {
        "entries": {
            "0": {
                "uid": 0,
                "key": ["Elara"],
                "keysecondary": ["sword"],
                "content": "Elara's blade",
                "selective": True,
                "selectiveLogic": 3,
                "order": 5,
                "position": 1,
                "disable": False,
                "matchWholeWords": False,
            }
        }
    }
    book = from_world_info(world, "world.json").book
    assert book["entries"][0]["position"] == "after_char"
    assert fired(book, "elara's sword") == ["Elara's blade"]
    assert fired(book, "elara alone") == []


def test_token_estimate_counts_cjk_characters_one_each() -> None:
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("東京都") == 3


async def test_fired_entries_go_after_the_frozen_prompt_and_the_prefix_stays(
    harness: Harness,
) -> None:
    partner = harness.app.catalog.require("example")
    book = {
        "scan_depth": 4,
        "entries": [entry(["lighthouse"], "The lighthouse keeper is called Oren.")],
    }
    (partner.dir / "lorebook.json").write_text(json.dumps(book), encoding="utf-8")
    harness.llm.script(Reply(text="first"), Reply(text="second"))
    await harness.send(dm(42, "tell me about the lighthouse"))
    await harness.settle()
    await harness.send(dm(42, "and the weather?"))
    await harness.settle()
    first, second = (r["messages"] for r in harness.llm.requests)
    assert "Oren" not in first[0]["content"]
    assert first[-1]["content"].startswith(LORE_FRAME) and "Oren" in first[-1]["content"]
    # the second turn's bytes begin with the first turn's system prompt and user message
    prefix = json.dumps(first[:2])[:-1]
    assert json.dumps(second).startswith(prefix)
    # the entry is still in the scanned window on the second turn, after the new message
    assert second[-1]["content"].startswith(LORE_FRAME)
    assert second[-2]["content"].endswith("and the weather?")


async def test_a_broken_lorebook_file_does_not_stop_the_partner(harness: Harness) -> None:
    partner = harness.app.catalog.require("example")
    (partner.dir / "lorebook.json").write_text('{"entries": [', encoding="utf-8")
    harness.llm.script(Reply(text="still here"))
    await harness.send(dm(42, "hello"))
    await harness.settle()
    assert harness.channel.texts() == ["still here"]


async def test_a_stored_book_that_does_not_read_is_skipped_with_one_warning(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    partner = harness.app.catalog.require("example")
    (partner.dir / "lorebook.json").write_text('{"entries": 5}', encoding="utf-8")
    harness.llm.script(Reply(text="one"), Reply(text="two"))
    with caplog.at_level(logging.WARNING, logger="partners.lore_books"):
        await harness.send(dm(42, "hello"))
        await harness.settle()
        await harness.send(dm(42, "hello again"))
        await harness.settle()
    assert harness.channel.texts() == ["one", "two"]
    warnings = [r.getMessage() for r in caplog.records if "lorebook" in r.getMessage()]
    assert len(warnings) == 1 and "'entries'" in warnings[0]


async def test_a_stored_entry_with_null_fields_still_fires(harness: Harness) -> None:
    partner = harness.app.catalog.require("example")
    book = {"entries": [entry(["lighthouse"], "Oren keeps it.", extensions=None, name=None)]}
    (partner.dir / "lorebook.json").write_text(json.dumps(book), encoding="utf-8")
    harness.llm.script(Reply(text="yes"))
    await harness.send(dm(42, "the lighthouse?"))
    await harness.settle()
    assert harness.channel.texts() == ["yes"]
    assert "Oren keeps it." in harness.llm.requests[-1]["messages"][-1]["content"]


async def test_a_stored_entry_with_a_bad_field_is_left_out_and_the_rest_fire(
    harness: Harness,
) -> None:
    partner = harness.app.catalog.require("example")
    book = {
        "entries": [
            {**entry([], "BROKEN"), "keys": {"a": 1}},
            entry(["lighthouse"], "Oren keeps it."),
        ]
    }
    (partner.dir / "lorebook.json").write_text(json.dumps(book), encoding="utf-8")
    harness.llm.script(Reply(text="yes"))
    await harness.send(dm(42, "the lighthouse?"))
    await harness.settle()
    last = harness.llm.requests[-1]["messages"][-1]["content"]
    assert "Oren keeps it." in last and "BROKEN" not in last


def overlapping(entries: int) -> dict[str, Any]:
    """The worst a card can build: keys that are each other's suffixes ("w", "w w", …), in
    texts made of them, scanned recursively."""
    text = " ".join(["w"] * 200)
    keys = [" ".join(["w"] * (i % 45 + 1)) for i in range(entries)]
    return {
        "recursive_scanning": True,
        "entries": [entry([key], f"{i} {text}") for i, key in enumerate(keys)],
    }


def test_the_scan_calls_the_matcher_once_per_round_whatever_the_entry_count() -> None:
    small = Lorebook(overlapping(50)).fire(["w"]).work
    large = Lorebook(overlapping(500)).fire(["w"]).work
    assert large.rounds == small.rounds <= MAX_RECURSION_STEPS + 1
    assert large.matcher_calls == small.matcher_calls <= large.rounds * 2  # folded and exact


def test_recursion_reads_only_the_text_of_entries_that_made_it_into_the_turn() -> None:
    # an ASCII token is four characters: no round reads more than the budget's worth of text
    # (and a few characters around each entry's)
    most = len(" w ") + MAX_RECURSION_STEPS * (4 * DEFAULT_BUDGET + 50)
    for entries in (50, 500, 5_000):
        assert Lorebook(overlapping(entries)).fire(["w"]).work.chars <= most


def test_the_matches_found_grow_with_the_text_scanned_not_with_the_keys() -> None:
    work = Lorebook(overlapping(500)).fire(["w"]).work
    # keys are at most MAX_KEY_CHARS long, so at most that many end at any one place
    assert 0 < work.matches <= (MAX_KEY_CHARS + 2) * work.chars


def test_an_entry_with_a_key_over_the_limit_is_left_out_with_a_note() -> None:
    long_key = entry(["w " * 60], "x", comment="Long")
    book = Lorebook({"entries": [long_key, entry(["a"], "ok")]}, "b.json")
    assert [e.content for e in book.entries] == ["ok"]
    assert book.notes == (
        f"b.json: entry 1 ('Long'): 'keys': a key of 120 characters is over the limit of "
        f"{MAX_KEY_CHARS}; left out",
    )


def test_a_key_never_matches_across_two_scanned_texts() -> None:
    book = {"scan_depth": 2, "entries": [entry(["red dragon"], "hit"), entry(["dra"], "x")]}
    assert fired(book, "the red", "dragon") == []
    assert fired(book, "the red dragon", "hello") == ["hit"]


async def test_a_deeply_nested_stored_book_is_skipped_and_the_partner_answers(
    harness: Harness,
) -> None:
    partner = harness.app.catalog.require("example")
    deep = '{"entries": [], "extensions": ' + '{"a": ' * 100_000 + "{}" + "}" * 100_001
    (partner.dir / "lorebook.json").write_text(deep, encoding="utf-8")
    harness.llm.script(Reply(text="still here"))
    await harness.send(dm(42, "hello"))
    await harness.settle()
    assert harness.channel.texts() == ["still here"]
