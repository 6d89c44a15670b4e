"""A turn starts from what its context read (``Store.turn_context``), and reads again only
where that read cannot answer: the model sees the same as when every part was read apart."""

from __future__ import annotations

from typing import Any

from bot.store import NewMessage
from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Reply

LONG_REPLY = "a story " * 80
"""Longer than the smallest history window (500 characters) all by itself."""


async def test_a_reaction_before_a_reply_too_long_for_the_history_still_reaches_the_model(
    harness_factory: Any,
) -> None:
    harness: Harness = await harness_factory(memory={"history_chars": 500})
    store = harness.app.store
    harness.llm.script(Reply(text="short hello"), Reply(text=LONG_REPLY), Reply(text="ok"))
    await harness.send(dm(42, "hello"))
    await harness.settle()
    await store.add_message(
        NewMessage(
            "test:42", "reaction", "Alice reacted 👍 to your message “short hello”",
            "user:test:42", partner_id="example", user_key="test:42", speaker="Alice",
        )
    )  # fmt: skip
    await harness.send(dm(42, "tell me a story"))
    await harness.settle()

    await harness.send(dm(42, "and then?"))
    await harness.settle()

    # the long reply alone overflows the window, so no history is shown; the reactions
    # since the start of the (empty) window are, as before the context was read at once
    last = str(harness.llm.requests[-1]["messages"])
    assert "a story a story" not in last
    assert "reacted 👍" in last
    assert harness.channel.texts()[-1] == "ok"
