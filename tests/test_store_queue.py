"""Messages, the work queue, delivery and media held to one contract on every backend (the
``store`` fixture runs each test on SQLite and on PostgreSQL): deduplication, pending turns
closed with their reply in one step, failed turns counted, every delivered chunk recorded
once, retries waiting per chat, platform updates seen once, media in the order stored."""

from __future__ import annotations

import pytest

from bot.store import DeliveryRetry, LeaseLost, NewMedia, NewMessage, Store


def inbound(text: str, dedup: str, queue: str = "test:1") -> NewMessage:
    return NewMessage(
        "test:1", "user", text, "user:test:1", status="pending", dedup_key=dedup,
        queue_key=queue, partner_id="mira", user_key="test:1",
    )  # fmt: skip


async def stored(store: Store, message: NewMessage) -> int:
    message_id = await store.add_message(message)
    assert message_id is not None
    return message_id


async def test_a_message_recorded_twice_is_stored_once(store: Store) -> None:
    first = await stored(store, inbound("hello", "test:1:100"))
    assert await store.add_message(inbound("hello again", "test:1:100")) is None
    assert [m.id for m in await store.pending("test:1")] == [first]
    again, new = await store.add_messages([inbound("a", "test:1:100"), inbound("b", "d")])
    assert again is None
    assert new is not None and new > first  # ids grow; PostgreSQL's may skip numbers


async def test_a_turn_closes_its_messages_and_records_the_reply_at_once(store: Store) -> None:
    session = await store.create_session(
        partner_id="mira", chat_key="test:1", user_key="test:1", audience="user:test:1",
        system_prompt="p",
    )  # fmt: skip
    a = await stored(store, inbound("one", "d1"))
    b = await stored(store, inbound("two", "d2"))
    other = await stored(store, inbound("elsewhere", "d3", queue="test:2"))
    assert await store.pending_queue_keys() == ["test:1", "test:2"]
    assert await store.pending_count() == 3
    reply = NewMessage("test:1", "assistant", "hi!", "user:test:1", status="delivering",
                       session_id=session.id, partner_id="mira")  # fmt: skip
    reply_id = await store.finish_turn([a, b], session.id, reply)
    assert await store.pending("test:1") == []
    assert [m.id for m in await store.pending("test:2")] == [other]
    assert [(m.role, m.text) for m in await store.session_messages(session.id)] == [
        ("user", "one"),
        ("user", "two"),
        ("assistant", "hi!"),
    ]
    answered = await store.answered_message(reply_id)
    assert answered is not None and answered.id == b
    assert await store.interrupted_deliveries() == [reply_id]


async def test_failed_turns_are_counted_only_on_messages_still_pending(store: Store) -> None:
    a = await stored(store, inbound("one", "d1"))
    b = await stored(store, inbound("two", "d2"))
    assert await store.count_failed_turn([a, b]) == 1
    assert await store.count_failed_turn([b]) == 2
    assert await store.turn_attempts(a) == 1
    await store.set_status(b, "done")
    assert await store.count_failed_turn([b]) == 0


async def test_each_chunk_is_recorded_once_and_the_last_one_delivers(store: Store) -> None:
    reply = await stored(
        store, NewMessage("test:1", "assistant", "long", "user:test:1", status="delivering")
    )
    await store.record_chunk(reply, 0, "p-1")
    await store.record_chunk(reply, 0, "p-1")  # a repeat after a crash between send and record
    await store.record_last_chunk(reply, 1, "p-2")
    assert await store.delivered_chunks(reply) == 2
    found = await store.reply_for_platform_message("test:1", "p-2")
    assert found is not None and found.id == reply and found.status == "delivered"
    assert await store.interrupted_deliveries() == []


async def test_a_refused_reply_waits_for_its_retry_and_leaves_when_settled(store: Store) -> None:
    older = await stored(
        store, NewMessage("test:1", "assistant", "one", "user:test:1", status="delivering")
    )
    newer = await stored(
        store, NewMessage("test:1", "assistant", "two", "user:test:1", status="delivering")
    )
    await store.schedule_delivery_retry(DeliveryRetry(older, 1, 10.0, 20.0, "429"))
    await store.schedule_delivery_retry(DeliveryRetry(older, 2, 10.0, 40.0, "429 again"))
    assert await store.delivery_retry(older) == DeliveryRetry(older, 2, 10.0, 40.0, "429 again")
    assert await store.next_delivery_retry_at() == 40.0
    assert await store.chats_with_due_retries(30.0) == []
    assert await store.chats_with_due_retries(40.0) == ["test:1"]
    [waiting] = await store.waiting_replies("test:1", before_id=newer)
    assert (waiting.message_id, waiting.queue_key, waiting.partner_id) == (older, None, None)
    assert await store.interrupted_deliveries() == [newer]  # the other one waits for its retry
    await store.mark_delivered(older)  # settled: its retry row goes with it
    assert await store.delivery_retry(older) is None
    assert await store.next_delivery_retry_at() is None


async def test_platform_updates_are_seen_once_and_rejected_ones_listed_in_order(
    store: Store,
) -> None:
    assert await store.seen_update("telegram", "7") is False
    assert await store.seen_update("telegram", "7") is True
    assert await store.update_seen("telegram", "7") is True
    assert await store.update_seen("telegram", "8") is False
    for update_id in ("30", "10", "20"):
        await store.reject_update("telegram", update_id)
    await store.reject_update("discord", "99")
    rejected = await store.rejected_updates("telegram")
    assert sorted(rejected) == ["10", "20", "30"]
    assert await store.seen_update("telegram", "10") is True  # skipped like a handled one


async def test_media_come_back_in_the_order_they_were_stored(store: Store) -> None:
    message = await store.add_message_with_media(
        NewMessage(
            "test:1", "user", "(voice note)", "user:test:1",
            media=(NewMedia("voice", "file-b", "audio/ogg", 3.5), NewMedia("photo", "file-a")),
        )
    )  # fmt: skip
    assert message is not None
    await store.add_media(message, [NewMedia("sticker", "file-0"), NewMedia("voice", "file-b")])
    await store.set_media_state(message, "voice", "file-b", "transcribed")
    media = (await store.media_for([message, 999]))[message]
    assert [(m.kind, m.ref, m.state) for m in media] == [
        ("voice", "file-b", "transcribed"),
        ("photo", "file-a", "new"),
        ("sticker", "file-0", "new"),
    ]
    await store.set_message_text(message, "hello from the voice note")
    found = await store.message(message)
    assert found is not None and found.text == "hello from the voice note"
    assert await store.delete_messages([message]) == 1
    assert await store.media_for([message]) == {}


async def test_a_reply_waiting_when_a_turn_records_its_own_is_found_before_it(
    store: Store,
) -> None:
    # PostgreSQL learns what waits in the statement that records the turn's reply; the answer
    # must be the same as a look of its own would give, on every backend
    def reply(text: str) -> NewMessage:
        return NewMessage("test:1", "assistant", text, "user:test:1", status="delivering")

    first = await store.finish_turn([await stored(store, inbound("a", "d1"))], None, reply("1"))
    assert await store.waiting_replies("test:1", before_id=first) == []
    await store.schedule_delivery_retry(DeliveryRetry(first, 1, 10.0, 20.0, "429"))
    second = await store.finish_turn([await stored(store, inbound("b", "d2"))], None, reply("2"))
    [waiting] = await store.waiting_replies("test:1", before_id=second)
    assert waiting.message_id == first
    await store.mark_delivered(first)
    third = await store.finish_turn([await stored(store, inbound("c", "d3"))], None, reply("3"))
    assert await store.waiting_replies("test:1", before_id=third) == []
    # a retry stored after that look: the next look sees it (what the recording told is told
    # once, to the look that follows it)
    await store.schedule_delivery_retry(DeliveryRetry(second, 1, 10.0, 20.0, "429"))
    assert [w.message_id for w in await store.waiting_replies("test:1", before_id=third)] == [
        second
    ]


def handover(text: str, to: str, dedup: str) -> NewMessage:
    """A reply handed to partner ``to`` as its turn (a scene's hand-over)."""
    return NewMessage(
        "test:1", "user", text, "group:test:1", status="pending", dedup_key=dedup,
        queue_key="scene:test:1", partner_id=to, user_key="partner:mira", speaker="Mira",
    )  # fmt: skip


async def test_the_messages_a_reply_causes_are_recorded_with_it_or_not_at_all(
    store: Store,
) -> None:
    first = await stored(store, inbound("both of you?", "d1", queue="scene:test:1"))
    [stale] = await store.claim_queue_keys("w1", 0, 1, "scene:test:1")
    [current] = await store.claim_queue_keys("w2", 30, 1, "scene:test:1")
    reply = NewMessage("test:1", "assistant", "Sol, your turn", "group:test:1",
                       status="delivering", partner_id="mira")  # fmt: skip
    sol = handover("Sol, your turn", "sol", "scene:1:mira:sol")
    with pytest.raises(LeaseLost):  # taken over: neither the reply nor its hand-over
        await store.finish_turn([first], None, reply, lease=stale, follow=[sol])
    assert [m.id for m in await store.pending("scene:test:1")] == [first]
    reply_id = await store.finish_turn([first], None, reply, lease=current, follow=[sol])
    waiting = await store.pending("scene:test:1")
    assert [(m.partner_id, m.text) for m in waiting] == [("sol", "Sol, your turn")]
    assert waiting[0].id > reply_id
    # the same hand-over again (a turn tried twice) is recorded once
    again = await stored(store, inbound("and you?", "d2", queue="scene:test:1"))
    await store.finish_turn([again], None, reply, lease=current, follow=[sol])
    assert [m.partner_id for m in await store.pending("scene:test:1")] == ["sol"]
