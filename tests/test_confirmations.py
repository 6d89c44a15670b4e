"""Questions before a tool call, on several workers (bot/turn/confirmations.py): a question
lives in the store, so an answer that reaches another worker (its own Confirmations, its own
connection to the one database) releases the turn waiting on the first. On each backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bot.store import Store
from bot.turn.confirmations import (
    ANSWERED,
    ASKED_BY_OTHERS,
    TIMED_OUT,
    Confirmations,
    Outcome,
)
from tests.conftest import RecordingChannel, StoreBackend, group_message

GROUP = "tea"
ALICE, BOB = 5, 6
QUESTION = "Mira wants to use the tool fake.echo with:\n{}"


@dataclass
class Worker:
    """One worker's part: its own connection to the database, channel and confirmations."""

    store: Store
    channel: RecordingChannel
    confirmations: Confirmations


@pytest.fixture
async def workers(store_backend: StoreBackend) -> AsyncIterator[tuple[Worker, Worker]]:
    made = []
    for _ in range(2):
        store, channel = await store_backend.open(), RecordingChannel()
        made.append(Worker(store, channel, Confirmations({"test": channel}, store, 30.0)))
    yield made[0], made[1]
    for worker in made:
        await worker.store.close()


async def asked(worker: Worker, user_id: int = ALICE) -> tuple[asyncio.Task[Outcome], dict]:
    """A turn on ``worker`` asking that person in the group; the question's button commands
    by label once it has been sent."""
    chat = group_message(GROUP, user_id, "").chat
    waiting = asyncio.create_task(worker.confirmations.ask(chat, f"test:{user_id}", QUESTION))
    [question] = await worker.channel.wait_sent(1)
    return waiting, {choice.label: choice.command for choice in question.choices}


async def answer(worker: Worker, user_id: int, text: str) -> bool:
    return await worker.confirmations.take(group_message(GROUP, user_id, text))


async def test_a_press_on_another_worker_releases_the_waiting_turn(
    workers: tuple[Worker, Worker],
) -> None:
    one, two = workers
    waiting, buttons = await asked(one)
    assert await answer(two, ALICE, buttons["Yes"])
    assert await asyncio.wait_for(waiting, 10) is Outcome.YES
    assert two.channel.sent == []  # a good answer needs no note


async def test_a_typed_no_on_another_worker_is_the_answer(
    workers: tuple[Worker, Worker],
) -> None:
    one, two = workers
    waiting, _ = await asked(one)
    assert not await answer(two, BOB, "no")  # Bob has no question open: an ordinary message
    assert await answer(two, ALICE, "No.")
    assert await asyncio.wait_for(waiting, 10) is Outcome.NO


async def test_only_the_person_asked_can_answer_and_only_once(
    workers: tuple[Worker, Worker],
) -> None:
    one, two = workers
    waiting, buttons = await asked(one)
    assert await answer(two, BOB, buttons["Yes"])
    assert [m.text for m in two.channel.sent] == [ASKED_BY_OTHERS]
    assert not waiting.done()
    assert await answer(one, ALICE, buttons["No"])
    assert await asyncio.wait_for(waiting, 10) is Outcome.NO
    assert await answer(two, ALICE, buttons["Yes"])
    assert two.channel.sent[-1].text == ANSWERED


async def test_a_second_question_while_one_is_open_is_not_asked(
    workers: tuple[Worker, Worker],
) -> None:
    one, two = workers
    waiting, buttons = await asked(one)
    chat = group_message(GROUP, ALICE, "").chat
    assert await two.confirmations.ask(chat, f"test:{ALICE}", QUESTION) is Outcome.NOT_ASKED
    assert await answer(two, ALICE, buttons["Yes"])
    assert await asyncio.wait_for(waiting, 10) is Outcome.YES


async def test_no_answer_in_time_is_not_a_yes_and_a_late_press_is_told(
    workers: tuple[Worker, Worker],
) -> None:
    one, two = workers
    one.confirmations.wait_seconds = 0.3
    waiting, buttons = await asked(one)
    assert await asyncio.wait_for(waiting, 10) is Outcome.TIMED_OUT
    assert await answer(two, ALICE, buttons["Yes"])
    assert [m.text for m in two.channel.sent] == [TIMED_OUT]
