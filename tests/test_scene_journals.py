"""In a scene each partner's review writes its journal from its own point of view: the
segment it reviews is what it heard and said in the group (people's messages to anyone, the
other partners' answers under their names, its own words, each once), never anyone's DM or
per-user memory. Real python-telegram-bot against the fakes."""

from __future__ import annotations

import json
from typing import Any

from partners.tools import user_memory_file
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    GROUP,
    OWNER,
    Gateway,
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)
from tests.test_scenes import ALICE, say, scene

QUIET_MEMORY = {"auto_memory": False}
"""Reviews run when the test asks, so the model's answers come in the test's order."""


def journal_answer(summary: str) -> Reply:
    return Reply(text=json.dumps({"journal": {"summary": summary}, "memory": []}))


def review_text(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


async def review(gateway: Gateway, fake_llm: FakeLLM, partner_id: str, summary: str) -> str:
    """Run ``partner_id``'s review of the group; the prompt the model was shown."""
    session = await gateway.app.store.open_session(f"telegram:{GROUP}", partner_id)
    assert session is not None
    fake_llm.script(journal_answer(summary))
    result = await gateway.app.reviewer.review(session.id)
    assert result.journal, result
    return review_text(fake_llm.requests[-1])


async def test_each_partner_reviews_what_it_heard_and_said_from_its_own_point_of_view(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", memory=QUIET_MEMORY)
    app = gateway.app
    sol = app.catalog.require("sol")
    await app.memory.add(
        user_memory_file(sol, f"telegram:{ALICE}"), "Alice's secret diary", reason="", source="t"
    )
    fake.send_user_message(chat_id=OWNER, text="/partner sol", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER)
    fake_llm.script(Reply(text="Kept."))
    fake.send_user_message(chat_id=OWNER, text="my owner DM secret", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER, count=2)
    fake_llm.script(
        Reply(text="I love rain, it smells of earth."),
        Reply(text="Rain is fine by me, Mira."),
        Reply(text="Thanks for asking, Sol's a grump."),
    )
    say(fake, "What do both of you think of the rain today, honestly?")
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    await settled(fake, gateway)

    sols = await review(gateway, fake_llm, "sol", "Rain talk with Mira and Alice")
    assert sols.startswith("You keep the diary and long-term memory of Sol")
    assert "from Sol's own point of view" in sols
    assert "I love rain, it smells of earth." in sols  # what Sol heard Mira say
    assert "Rain is fine by me, Mira." in sols  # what Sol said
    assert sols.count("think of the rain today") == 1  # stored once per partner, shown once
    assert sols.index("think of the rain") < sols.index("smells of earth") < sols.index("by me")
    for secret in ("Alice's secret diary", "my owner DM secret", "Kept."):
        assert secret not in sols

    miras = await review(gateway, fake_llm, "example", "Rain talk; Sol was grumpy")
    assert "from Mira's own point of view" in miras
    assert miras.count("Rain is fine by me, Mira.") == 1  # heard, and handed to her: once
    assert "Thanks for asking" in miras
    assert "Alice's secret diary" not in miras and "my owner DM secret" not in miras

    # each partner's own journal holds its own entry of the same talk
    for partner_id, summary in (("sol", "Rain talk with Mira"), ("example", "Sol was grumpy")):
        journals = list((app.catalog.require(partner_id).dir / "memory").glob("*.md"))
        assert summary in "".join(p.read_text(encoding="utf-8") for p in journals), partner_id


async def test_a_group_with_one_partner_is_reviewed_as_before(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(memory=QUIET_MEMORY)
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    fake_llm.script(Reply(text="Rain is lovely."))
    say(fake, "Mira, what do you think of the rain today, honestly?")
    await fake.wait_for_sent(chat_id=GROUP)
    await settled(fake, gateway)
    prompt = await review(gateway, fake_llm, "example", "Rain")
    assert "point of view" not in prompt
    assert "Rain is lovely." in prompt
