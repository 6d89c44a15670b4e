"""A partner deleted while a user talks with it: the user is told, once, and nobody else
answers in its place (the choice is not silently moved to another partner)."""

from __future__ import annotations

from bot.store import NewMessage
from bot.workers.queue_keys import queue_key
from tests.admin_support import admin, say
from tests.conftest import Harness, dm

ALICE = 42
CHAT = f"test:{ALICE}"


async def test_a_user_whose_partner_was_deleted_is_told_once_and_not_answered_by_another(
    harness: Harness,
) -> None:
    await admin(harness, "/admin partner new luna Luna")
    await admin(harness, "/admin partner set luna public true")  # a new partner is private
    await harness.send(dm(ALICE, "/partner luna"))
    await say(harness, ALICE, "hello", "hi, Luna here")
    await admin(harness, "/admin partner delete luna confirm")
    asked, before = len(harness.llm.requests), len(harness.channel.sent)
    await harness.send(dm(ALICE, "are you there?"))
    await harness.settle()
    [told] = harness.channel.sent[before:]
    assert "(luna) is no longer here" in told.text
    assert len(harness.llm.requests) == asked
    assert await harness.app.store.selected_partner(CHAT) is None
    harness.llm.requests.clear()
    assert await say(harness, ALICE, "hello?", "Mira here") == "Mira here"
    assert "You are Mira" in harness.llm.requests[0]["messages"][0]["content"]


async def test_messages_for_a_partner_deleted_before_their_turn_get_a_notice(
    harness: Harness,
) -> None:
    await harness.app.store.upsert_user(CHAT, "test", str(ALICE), "Alice", None)
    await harness.app.store.upsert_chat(CHAT, "test", str(ALICE), None, "dm", None)
    key = queue_key(CHAT, "ghost")
    message = NewMessage(
        chat_key=CHAT,
        role="user",
        text="hello ghost",
        audience=f"user:{CHAT}",
        status="pending",
        queue_key=key,
        partner_id="ghost",
        user_key=CHAT,
        speaker="Alice",
    )
    await harness.app.store.add_message(message)
    harness.app.dispatcher.notify(key)
    [notice] = await harness.channel.wait_sent(1)
    await harness.settle()
    assert "(ghost) is no longer here" in notice.text
    assert harness.llm.requests == []
