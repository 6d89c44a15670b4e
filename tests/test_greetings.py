"""A character card's greetings open conversations: on picking the partner, on /new and on
first contact, stored as the partner's message so the model sees them."""

from __future__ import annotations

import json
from pathlib import Path

from partners.cards import CARD_FILE, plan_import, write_import
from partners.greetings import greetings_of
from partners.persona import load_partner
from tests import card_fixtures as cards
from tests.conftest import Harness, HarnessFactory, dm
from tests.fakes.fake_llm import Reply

GREETING = "*looks up from the easel* Oh, hello Alice! I'm Ŝirin 🌙."


def add_card_partner(harness: Harness) -> None:
    root = Path(harness.config.data_dir) / "partners"
    write_import(plan_import(cards.as_json(cards.v2()), "c.json", "sirin", root), root)
    cards.publish(root / "sirin")  # user 42 is not the owner
    harness.app.catalog.reload()


async def test_picking_the_partner_greets_and_the_model_sees_the_greeting(
    harness: Harness,
) -> None:
    add_card_partner(harness)
    await harness.send(dm(42, "/partner sirin"))
    sent = await harness.channel.wait_sent(2)
    assert sent[0].text.startswith("You're now talking with Ŝirin 🌙")
    assert sent[1].text == GREETING and sent[1].partner_name == "Ŝirin 🌙"
    harness.llm.script(Reply(text="Nice to meet you"))
    await harness.send(dm(42, "hi"))
    await harness.settle()
    # the card's depth prompt comes before both (depth 4, system), as in SillyTavern
    messages = [m for m in harness.llm.requests[0]["messages"] if m["role"] != "system"]
    assert messages[0] == {"role": "assistant", "content": GREETING}
    assert messages[1]["content"].endswith("hi")


async def test_new_conversation_greets_with_the_next_greeting_in_turn(harness: Harness) -> None:
    add_card_partner(harness)
    await harness.send(dm(42, "/partner sirin"))
    await harness.channel.wait_sent(2)
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(42, "hi"))
    await harness.settle()
    await harness.send(dm(42, "/new"))
    sent = await harness.channel.wait_sent(5)
    assert sent[3].text.startswith("Started a new conversation")
    assert sent[4].text == "Welcome back, Alice."


async def test_first_contact_with_start_greets_once(harness_factory: HarnessFactory) -> None:
    harness = await harness_factory(partners={"default": "sirin"})
    add_card_partner(harness)
    await harness.send(dm(42, "/start"))
    sent = await harness.channel.wait_sent(2)
    assert sent[1].text == GREETING
    await harness.send(dm(42, "/start"))
    await harness.channel.wait_sent(3)
    await harness.settle()
    assert harness.channel.texts().count(GREETING) == 1


async def test_a_partner_without_a_card_does_not_greet(harness: Harness) -> None:
    await harness.send(dm(42, "/partner example"))
    await harness.channel.wait_sent(1)
    harness.llm.script(Reply(text="hello"))
    await harness.send(dm(42, "hi"))
    sent = await harness.channel.wait_sent(2)
    assert [m.text for m in sent][1] == "hello"


def test_a_hand_edited_card_nested_too_deep_has_no_greetings(tmp_path: Path) -> None:
    root = tmp_path / "partners"
    write_import(plan_import(cards.as_json(cards.v2()), "c.json", "sirin", root), root)
    (root / "sirin" / CARD_FILE).write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert greetings_of(load_partner(root / "sirin")) == []


def test_alternate_greetings_given_as_one_text_are_one_greeting(tmp_path: Path) -> None:
    root = tmp_path / "partners"
    write_import(plan_import(cards.as_json(cards.v2()), "c.json", "sirin", root), root)
    card = root / "sirin" / CARD_FILE
    side = json.loads(card.read_text(encoding="utf-8"))
    side["alternate_greetings"] = "Hello again"
    card.write_text(json.dumps(side), encoding="utf-8")
    assert greetings_of(load_partner(root / "sirin")) == [side["first_mes"], "Hello again"]


async def test_new_before_any_conversation_greets_instead_of_saying_it_is_new(
    harness_factory: HarnessFactory,
) -> None:
    harness = await harness_factory(partners={"default": "sirin"})
    add_card_partner(harness)
    await harness.send(dm(42, "/new"))
    sent = await harness.channel.wait_sent(2)
    assert sent[0].text.startswith("Started a new conversation")
    assert sent[1].text == GREETING


async def test_new_before_any_conversation_without_greetings_says_so(harness: Harness) -> None:
    await harness.send(dm(42, "/new"))
    sent = await harness.channel.wait_sent(1)
    await harness.settle()
    assert [m.text for m in sent] == ["This is already a new conversation."]
