"""What a hostile card cannot do: grow a prompt, a turn or a greeting without bound through
its placeholders."""

from __future__ import annotations

from pathlib import Path

from partners.cards import plan_import, write_import
from partners.catalog import PartnerCatalog
from partners.greetings import filled
from partners.lore_books import LoreLibrary
from partners.persona import (
    MAX_PLACEHOLDER_VALUE_CHARS,
    MAX_PLACEHOLDERS_FILLED,
    Partner,
    PromptContext,
    assemble_prompt,
)
from tests import card_fixtures as cards

LONG_NAME = "N" * 60
"""The longest name a partner may have (preset.yml)."""
MACROS = "{{char}} " * 100_000
"""900 kB of card text that names its character over and over."""
MOST_ADDED = MAX_PLACEHOLDERS_FILLED * MAX_PLACEHOLDER_VALUE_CHARS


def card_partner(tmp_path: Path, **fields: str) -> Partner:
    data = cards.card_data(name=LONG_NAME, **fields)
    raw = cards.as_json(cards.v2(data))
    write_import(plan_import(raw, "c.json", "macro", tmp_path), tmp_path)
    catalog = PartnerCatalog(tmp_path)
    catalog.reload()
    return catalog.require("macro")


def test_placeholders_cannot_grow_the_system_prompt_past_the_bound(tmp_path: Path) -> None:
    partner = card_partner(tmp_path, description=MACROS)
    context = PromptContext(user="Ana", session="s", platform="test")
    prompt = assemble_prompt(partner, context, budget=10**7, notice=False).text
    stored = len((partner.dir / "IDENTITY.md").read_text(encoding="utf-8"))  # as {{partner}}
    assert len(prompt) <= stored + 2_000 + MOST_ADDED
    assert prompt.startswith(f"You are {LONG_NAME}.")  # the first ones are filled


def test_placeholders_cannot_grow_the_note_after_the_history_past_the_bound(
    tmp_path: Path,
) -> None:
    partner = card_partner(tmp_path, post_history_instructions=MACROS)
    note = LoreLibrary().turn_note(partner, ["hello"], "U" * 500, "chat", 0.0)
    stored = len((partner.dir / "POST_HISTORY.md").read_text(encoding="utf-8"))
    assert len(note) <= stored + MOST_ADDED
    assert note.startswith(f"{LONG_NAME} ")


def test_a_long_user_name_is_cut_where_it_fills_a_placeholder() -> None:
    greeting = filled("Hello {{user}}!", "Kai", "U" * 500)
    assert greeting == f"Hello {'U' * MAX_PLACEHOLDER_VALUE_CHARS}!"


def test_placeholders_cannot_grow_a_greeting_past_the_bound() -> None:
    greeting = filled(MACROS, LONG_NAME, "Ana")
    assert len(greeting) <= len(MACROS) + MOST_ADDED
