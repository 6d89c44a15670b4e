"""SIGTERM while the gateway is busy, as a service manager stops it: the turns in flight finish
before it exits, the rest are answered after the restart, and every message gets one reply."""

from __future__ import annotations

from tests.e2e.conftest import World, assert_no_secrets

CHATS = 20
MESSAGES_PER_CHAT = 2
ANSWER_SECONDS = 0.5
IN_FLIGHT_BEFORE_STOP = 5
TIMEOUT_SECONDS = 60.0


async def test_sigterm_under_load_finishes_or_resumes_every_turn(world: World) -> None:
    world.model.answer_delay_seconds = ANSWER_SECONDS
    gateway = await world.start()
    tags = []
    for round_number in range(MESSAGES_PER_CHAT):
        for chat in range(CHATS):
            tag = world.tag()
            tags.append(tag)
            world.send(900 + chat, f"message {round_number} of a busy evening #{tag}")
    await world.llm.wait_for_requests(IN_FLIGHT_BEFORE_STOP, timeout=TIMEOUT_SECONDS)

    assert await gateway.terminate() == 0
    asked = {tag for tag, count in world.model.chat_requests.items() if count}
    assert asked, "no turn was in flight"
    for tag in asked:
        assert world.replies_naming(tag), f"#{tag} was in flight and not finished before exit"
    unanswered = [tag for tag in tags if not world.replies_naming(tag)]

    world.model.answer_delay_seconds = 0
    restarted = await world.start()
    for tag in tags:
        await world.wait_for_reply(tag, timeout=TIMEOUT_SECONDS)
    for tag in tags:
        assert len(world.replies_naming(tag)) == 1, f"#{tag} answered twice"
    assert unanswered, "everything finished before the stop: the load was too light"
    for process in (gateway, restarted):
        assert process.errors() == []
        assert_no_secrets(process.output)
    assert "stopping" in gateway.output
