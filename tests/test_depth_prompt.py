"""A card's ``extensions.depth_prompt`` reaches the model at its depth with its role, as
SillyTavern places it, its placeholders filled."""

from __future__ import annotations

import json
from typing import Any

from bot.store import MessageRow
from bot.turn.chat import TurnInput, build_messages
from partners.lore_books import DepthNote, depth_prompt
from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Reply


def test_depth_prompt_defaults_as_sillytavern_reads_it() -> None:
    assert depth_prompt({"extensions": {"depth_prompt": {"prompt": "Eyes: green."}}}) == (
        4,
        "system",
        "Eyes: green.",
    )
    found = {"prompt": "x", "depth": 0, "role": "assistant"}
    assert depth_prompt({"extensions": {"depth_prompt": found}}) == (0, "assistant", "x")
    assert depth_prompt({"extensions": {"depth_prompt": {"prompt": " "}}}) is None
    assert depth_prompt({"extensions": {"depth_prompt": {"prompt": "x", "role": "god"}}}) == (
        4,
        "system",
        "x",
    )


def row(number: int, role: str) -> MessageRow:
    return MessageRow(number, "s", "p", "c", None, "u", "", role, f"m{number}", "all", "done", 0.0)


def contents(turn: TurnInput) -> list[Any]:
    return [(m["role"], m["content"]) for m in build_messages(turn)]


def test_the_note_goes_that_many_messages_before_the_end() -> None:
    history = [row(1, "user"), row(2, "assistant")]
    for depth, at in ((0, 4), (1, 3), (4, 1), (9, 1)):
        turn = TurnInput("sys", history, [row(3, "user")], depth_note=DepthNote(depth, "user", "N"))
        messages = contents(turn)
        assert messages[at] == ("user", "N"), depth
        assert len(messages) == 5


async def test_a_cards_depth_prompt_reaches_the_model_with_its_role(harness: Harness) -> None:
    partner = harness.app.catalog.require("example")
    note = {"prompt": "{{char}} has green eyes; {{user}} knows.", "depth": 1, "role": "system"}
    card = {"name": partner.name, "extensions": {"depth_prompt": note}}
    (partner.dir / "card.json").write_text(json.dumps(card), encoding="utf-8")
    harness.llm.script(Reply(text="hi"), Reply(text="fine"))
    await harness.send(dm(42, "hello"))
    await harness.settle()
    await harness.send(dm(42, "how are you?"))
    await harness.settle()
    messages = harness.llm.requests[-1]["messages"]
    placed = messages[-2]
    assert placed["role"] == "system"
    assert placed["content"].startswith(f"{partner.name} has green eyes; ")
    assert "{{" not in placed["content"]
    assert messages[-1]["content"].endswith("how are you?")
