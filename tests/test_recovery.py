"""Crash recovery: a restart answers what was never answered, once, and finishes deliveries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.base import DeliveryError
from bot.app import DataDirBusy, build_app
from bot.events import Outbound
from tests.conftest import Harness, RecordingChannel, dm
from tests.fakes.fake_llm import Reply


async def crash(harness: Harness) -> None:
    """Stop as a crash would: running turns are cut off wherever they are."""
    await harness.app.dispatcher.close(0)
    await harness.app.stop()


async def test_restart_after_crash_mid_turn_answers_exactly_once(harness_factory: Any) -> None:
    first = await harness_factory()
    never = asyncio.Event()

    async def hang(request: dict[str, Any]) -> Reply:
        del request
        await never.wait()
        return Reply(text="too late")

    first.llm.responder = hang
    await first.send(dm(42, "are you still awake?"))
    await first.llm.wait_for_requests(1)
    await crash(first)
    assert first.channel.sent == []

    first.llm.responder = None
    first.llm.script(Reply(text="yes, here"))
    second = await harness_factory()
    await second.settle()
    assert second.channel.texts() == ["yes, here"]
    assert "are you still awake?" in second.llm.last_user_text()
    third = await restart(second, harness_factory)
    assert third.channel.sent == []


async def restart(harness: Harness, harness_factory: Any) -> Harness:
    await harness.app.stop()
    again = await harness_factory()
    await again.settle()
    return again


async def test_restart_during_delivery_sends_only_the_missing_chunks(harness_factory: Any) -> None:
    first = await harness_factory(chunk_chars=10)
    blocked = asyncio.Event()
    original_send = first.channel.send

    async def send_then_hang(message: Outbound) -> str | None:
        if len(first.channel.sent) == 2:
            blocked.set()
            await asyncio.Event().wait()
        return await original_send(message)

    first.channel.send = send_then_hang  # type: ignore[method-assign]
    first.llm.script(Reply(text="0123456789abcdefghijKLMNOPQRST"))
    await first.send(dm(42, "tell me a long thing"))
    await asyncio.wait_for(blocked.wait(), 5)
    await crash(first)
    assert first.channel.texts() == ["0123456789", "abcdefghij"]

    second = await harness_factory(chunk_chars=10)
    await second.settle()
    assert second.channel.texts() == ["KLMNOPQRST"]
    assert len(first.llm.requests) == 1


async def test_failed_attempts_of_a_turn_count_across_a_restart(harness_factory: Any) -> None:
    first = await harness_factory()
    first.channel.fail_next_stream = [RuntimeError("preview broke"), RuntimeError("again")]
    never = asyncio.Event()

    async def hang(request: dict[str, Any]) -> Reply:
        del request
        await never.wait()
        return Reply(text="too late")

    first.llm.responder = hang
    await first.send(dm(42, "still there?"))
    await first.llm.wait_for_requests(1)  # two attempts failed; the third is under way
    await crash(first)  # a crash is not a failed attempt: the third runs again after it

    first.llm.responder = None
    first.llm.script(Reply(text="a fourth attempt must not happen"))
    broken = RecordingChannel()
    broken.fail_next_stream = [RuntimeError("still broken")]
    second = await harness_factory(channel=broken)
    await second.settle()
    [apology] = second.channel.texts()
    assert apology.startswith("Sorry")
    assert len(first.llm.requests) == 1


async def test_transient_delivery_failure_is_retried(harness: Harness) -> None:
    harness.channel.fail_next = [DeliveryError("429", retryable=True, retry_after=0.01)]
    harness.llm.script(Reply(text="arrives anyway"))
    await harness.send(dm(42, "hi"))
    await harness.settle()
    assert harness.channel.texts() == ["arrives anyway"]


async def test_a_long_reply_refused_halfway_goes_on_from_the_refused_chunk(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(
        chunk_chars=10, delivery={"first_pause_seconds": 0.01, "max_pause_seconds": 0.05}
    )
    refusals = 3
    send = harness.channel.send

    async def refuse_the_second_chunk(message: Outbound) -> str | None:
        nonlocal refusals
        if message.text == "abcdefghij" and refusals:
            refusals -= 1
            raise DeliveryError("502 Bad Gateway", retryable=True)
        return await send(message)

    harness.channel.send = refuse_the_second_chunk  # type: ignore[method-assign]
    harness.llm.script(Reply(text="0123456789abcdefghijKLMNOPQRST"))
    await harness.send(dm(42, "tell me a long thing"))
    await harness.channel.wait_sent(3)
    assert harness.channel.texts() == ["0123456789", "abcdefghij", "KLMNOPQRST"]
    assert refusals == 0


async def test_a_second_writer_stops_with_a_clear_message(harness: Harness) -> None:
    with pytest.raises(DataDirBusy, match="in use by a running gateway"):
        await build_app(harness.config, {})
