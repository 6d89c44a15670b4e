"""A message in, one reply out: the chat loop and dispatcher through a recording channel."""

from __future__ import annotations

from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Failure, Reply


async def test_dm_gets_one_reply_from_the_partner(harness: Harness) -> None:
    harness.llm.script(Reply(text="Hello Alice!"))
    await harness.send(dm(42, "hi there"))
    sent = await harness.channel.wait_sent(1)
    await harness.settle()
    assert [m.text for m in sent] == ["Hello Alice!"]
    assert sent[0].partner_name == "Mira"
    request = harness.llm.requests[0]
    assert request["messages"][0]["role"] == "system"
    assert "hi there" in harness.llm.last_user_text()


async def test_llm_down_gives_one_apology_and_keeps_the_message(harness: Harness) -> None:
    harness.llm.script(Failure(503), Failure(503))
    await harness.send(dm(42, "are you awake?"))
    sent = await harness.channel.wait_sent(1)
    await harness.settle()
    assert len(sent) == 1 and "Sorry" in sent[0].text
    hits = await harness.app.store.search("example", "awake", None, 10)
    assert any("are you awake?" in h.text for h in hits)
