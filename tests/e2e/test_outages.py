"""The providers fail, the gateway carries on: an LLM outage costs each turn one apology and
ends by itself; a Telegram API that fails a fifth of its calls still gets every reply once; a
reply Telegram refuses through an outage, and a kill -9 in the middle of it, arrives once when
the outage ends."""

from __future__ import annotations

import asyncio
from collections import Counter

from bot.turn.runner import APOLOGY
from tests.e2e.conftest import World, assert_no_secrets

CHATS = 8
MESSAGES_PER_CHAT = 3
REPLY_TIMEOUT_SECONDS = 60.0


async def converse(world: World, chats: list[int], rounds: int) -> list[str]:
    """Each chat sends ``rounds`` messages, one after the answer to the last; returns tags."""
    sent: list[str] = []

    async def one_chat(chat: int) -> None:
        for _ in range(rounds):
            tag = world.tag()
            sent.append(tag)
            before = len(world.replies(chat))
            world.send(chat, f"how is it going? #{tag}")
            await world.telegram.wait_for_sent(
                chat_id=chat, count=before + 1, timeout=REPLY_TIMEOUT_SECONDS
            )

    await asyncio.gather(*(one_chat(chat) for chat in chats))
    return sent


async def test_llm_outage_costs_one_apology_per_turn_and_service_resumes_by_itself(
    world: World,
) -> None:
    gateway = await world.start()
    chats = [600 + n for n in range(CHATS)]
    await converse(world, chats, 1)

    world.llm.down = True
    during = await converse(world, chats, MESSAGES_PER_CHAT)
    world.llm.down = False
    after = await converse(world, chats, MESSAGES_PER_CHAT)

    for chat in chats:
        texts = [call.text or "" for call in world.replies(chat)]
        assert len(texts) == 1 + 2 * MESSAGES_PER_CHAT
        assert texts[1 : 1 + MESSAGES_PER_CHAT] == [APOLOGY] * MESSAGES_PER_CHAT
        # the messages of the outage stay in the history, so the model may take them up
        assert all(text.startswith("ok #") for text in texts[1 + MESSAGES_PER_CHAT :])
    assert len(during) == CHATS * MESSAGES_PER_CHAT
    for tag in after:
        [reply] = world.replies_naming(tag)
        assert reply.endswith(f"#{tag}")
    assert gateway.running
    assert gateway.errors() == []
    assert_no_secrets(gateway.output)


async def test_every_reply_arrives_once_while_telegram_fails_a_fifth_of_its_calls(
    world: World,
) -> None:
    gateway = await world.start()
    world.telegram.fail_ratio = 0.2  # 500s on sends, typing, everything but getUpdates
    # and for certain, whatever the draws: two flood waits and two 500s on the first sends
    world.telegram.fail_next("sendMessage", status=429, retry_after=1, count=2)
    world.telegram.fail_next("sendMessage", status=500, count=2)
    chats = [700 + n for n in range(CHATS)]
    tags = await converse(world, chats, MESSAGES_PER_CHAT)

    failed = Counter(c.status for c in world.telegram.calls if c.method == "sendMessage")
    assert failed[429] == 2 and failed[500] >= 2, failed
    for tag in tags:
        assert world.replies_naming(tag) == [f"ok #{tag}"]
    for chat in chats:
        assert len(world.replies(chat)) == MESSAGES_PER_CHAT
    assert gateway.running
    assert gateway.errors() == []
    assert_no_secrets(gateway.output)


async def test_a_reply_refused_through_an_outage_and_a_kill_arrives_once_after_it(
    world: World,
) -> None:
    config = world.config(
        delivery={"retry_minutes": 5, "first_pause_seconds": 0.1, "max_pause_seconds": 0.5}
    )
    gateway = await world.start(config)
    chat = 800
    world.telegram.failing_chats[chat] = 502

    def refused() -> int:
        return sum(1 for c in world.telegram.calls if c.chat_id == chat and c.status == 502)

    tag = world.tag()
    world.send(chat, f"anyone home? #{tag}")
    await world.telegram.wait_until(lambda: refused() >= 3, REPLY_TIMEOUT_SECONDS, "refusals")
    await gateway.kill()

    gateway = await world.start(config)
    before = refused()
    await world.telegram.wait_until(lambda: refused() > before, REPLY_TIMEOUT_SECONDS, "a retry")
    del world.telegram.failing_chats[chat]  # the outage ends
    await world.wait_for_reply(tag)
    await gateway.terminate()
    assert world.replies_naming(tag) == [f"ok #{tag}"]
    assert world.model.chat_requests[tag] == 1  # delivered after the restart, not answered again
    [[undelivered]] = world.query("SELECT COUNT(*) FROM messages WHERE status = 'delivering'")
    assert undelivered == 0
    assert [p.errors() for p in world.processes] == [[], []]
