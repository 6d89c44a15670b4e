"""What a turn reads before its model call, in one round trip (``Store.turn_context``), and
the tokens of its reply booked with the reply (``Store.finish_turn``): part of the store
contract every backend keeps."""

from __future__ import annotations

from typing import Any

from bot.store import NewMedia, NewMessage, NewUsage, Store


async def a_dm(store: Store) -> None:
    await store.upsert_user("test:7", "test", "7", "Alice", "alice")
    await store.upsert_chat("test:7", "test", "7", None, "dm", None)


async def said(store: Store, text: str, role: str = "user", **fields: Any) -> int:
    message_id = await store.add_message(
        NewMessage("test:7", role, text, "user:test:7", partner_id="mira", **fields)
    )
    assert message_id is not None
    return message_id


async def test_a_turn_context_holds_the_pending_messages_and_what_answering_them_needs(
    store: Store,
) -> None:
    await a_dm(store)
    before = await store.create_session(
        partner_id="mira", chat_key="test:7", user_key="test:7", audience="user:test:7",
        system_prompt="before",
    )  # fmt: skip
    carried = await said(store, "last time", session_id=before.id)
    await store.end_session(before.id, "idle")
    session = await store.create_session(
        partner_id="mira", chat_key="test:7", user_key="test:7", audience="user:test:7",
        system_prompt="now", carry_from=before.id,
    )  # fmt: skip
    old_reaction = await said(store, "Alice reacted 👍", role="reaction")
    spoken = await said(
        store, "a voice note", session_id=session.id, media=(NewMedia("voice", "file-1"),)
    )
    answer = await said(store, "an answer", role="assistant", session_id=session.id)
    new_reaction = await said(store, "Alice reacted ❤", role="reaction")
    await said(store, "a notice", role="notice", session_id=session.id)
    photo = await said(
        store, "look", status="pending", queue_key="test:7|mira", user_key="test:7",
        media=(NewMedia("photo", "file-2"),),
    )  # fmt: skip
    again = await said(store, "well?", status="pending", queue_key="test:7|mira", user_key="test:7")
    await said(store, "another queue", status="pending", queue_key="test:7|@owner")

    context = await store.turn_context("test:7|mira", reactions=5)

    assert [row.id for row in context.pending] == [photo, again]
    assert context.chat is not None and context.chat.kind == "dm"
    assert context.user is not None and context.user["display_name"] == "Alice"
    assert context.session is not None and context.session.id == session.id
    assert [row.id for row in context.history] == [spoken, answer]  # no notice, no pending
    assert [row.id for row in context.carried] == [carried]
    assert sorted(context.media) == [spoken, photo]
    assert context.media[photo][0].ref == "file-2"
    assert context.reactions_after == answer
    assert [row.id for row in context.reactions] == [new_reaction]
    assert old_reaction not in [row.id for row in context.reactions]


async def test_a_turn_context_reads_no_session_once_the_chats_session_ended(store: Store) -> None:
    await a_dm(store)
    session = await store.create_session(
        partner_id="mira", chat_key="test:7", user_key="test:7", audience="user:test:7",
        system_prompt="p",
    )  # fmt: skip
    await said(store, "before", session_id=session.id)
    await store.end_session(session.id, "idle")
    await said(store, "hello", status="pending", queue_key="test:7|mira", user_key="test:7")

    context = await store.turn_context("test:7|mira", reactions=5)

    assert context.session is None
    assert context.history == [] and context.carried == []
    assert context.reactions_after == 0


async def test_a_turn_context_of_a_queue_with_nothing_pending_is_empty(store: Store) -> None:
    await a_dm(store)
    await said(store, "answered already", status="done", queue_key="test:7|mira")

    context = await store.turn_context("test:7|mira", reactions=5)

    assert context.pending == []
    assert context.chat is None and context.session is None


async def test_finish_turn_books_what_the_reply_cost_with_the_reply(store: Store) -> None:
    await a_dm(store)
    session = await store.create_session(
        partner_id="mira", chat_key="test:7", user_key="test:7", audience="user:test:7",
        system_prompt="p",
    )  # fmt: skip
    asked = await said(store, "hi", status="pending", queue_key="test:7|mira", user_key="test:7")
    reply = NewMessage(
        "test:7", "assistant", "hello", "user:test:7", "delivering", partner_id="mira"
    )

    await store.finish_turn(
        [asked], session.id, reply, usage=NewUsage("2026-03-09", "mira", "chat", "m1", 120, 30)
    )
    await store.finish_turn(
        [asked], session.id, reply, usage=NewUsage("2026-03-09", "mira", "chat", "m1", 80, 20)
    )

    assert await store.tokens_on("2026-03-09") == {"mira": 250}
    rows = await store.usage("2026-03-09")
    assert [(r["calls"], r["prompt_tokens"], r["completion_tokens"]) for r in rows] == [
        (2, 200, 50)
    ]


async def test_finish_turn_closes_the_turn_and_records_the_reply_with_its_actions(
    store: Store,
) -> None:
    await a_dm(store)
    session = await store.create_session(
        partner_id="mira", chat_key="test:7", user_key="test:7", audience="user:test:7",
        system_prompt="p",
    )  # fmt: skip
    first = await said(store, "hi", status="pending", queue_key="test:7|mira", user_key="test:7")
    second = await said(store, "you?", status="pending", queue_key="test:7|mira", user_key="test:7")
    reply = NewMessage(
        "test:7", "assistant", "hello", "user:test:7", "delivering", partner_id="mira",
        session_id=session.id, media=(NewMedia("sticker", "s-1"), NewMedia("react", "❤")),
    )  # fmt: skip

    reply_id = await store.finish_turn([first, second], session.id, reply)

    assert await store.pending("test:7|mira") == []
    closed = [await store.message(message_id) for message_id in (first, second)]
    assert [(m.status, m.session_id) for m in closed if m] == [("done", session.id)] * 2
    recorded = await store.message(reply_id)
    assert recorded is not None and (recorded.status, recorded.text) == ("delivering", "hello")
    answered = await store.answered_message(reply_id)
    assert answered is not None and answered.id == second
    actions = (await store.media_for([reply_id]))[reply_id]
    assert [(a.kind, a.ref) for a in actions] == [("sticker", "s-1"), ("react", "❤")]
    after = await store.session(session.id)
    assert after is not None and after.last_active_at >= session.last_active_at
    assert await store.usage("2000-01-01") == []


async def test_a_scene_key_is_worked_one_partner_at_a_time_in_order(store: Store) -> None:
    """A scene's one key holds several partners' messages: a turn takes the oldest and
    those after it for the same partner, up to the first for another."""
    await a_dm(store)
    key = "test:7|@scene"

    async def waiting(text: str, partner: str) -> int:
        message_id = await store.add_message(
            NewMessage(
                "test:7", "user", text, "user:test:7", status="pending", queue_key=key,
                partner_id=partner, user_key="test:7",
            )
        )  # fmt: skip
        assert message_id is not None
        return message_id

    first = await waiting("mira, hi", "mira")
    second = await waiting("and more", "mira")
    sol = await waiting("sol, hi", "sol")
    last = await waiting("mira again", "mira")

    context = await store.turn_context(key, reactions=5)
    assert [row.id for row in context.pending] == [first, second]
    await store.finish_turn([first, second], None, NewMessage("test:7", "assistant", "hey", "a"))
    assert [row.id for row in (await store.turn_context(key, reactions=5)).pending] == [sol]
    await store.finish_turn([sol], None, NewMessage("test:7", "assistant", "yo", "a"))
    assert [row.id for row in (await store.turn_context(key, reactions=5)).pending] == [last]


async def test_chat_tail_reads_what_was_said_newest_last(store: Store) -> None:
    await a_dm(store)
    heard = [await said(store, f"line {n}") for n in range(4)]
    await said(store, "a reaction", role="reaction")
    answer = await said(store, "an answer", role="assistant")
    context = await said(store, "chatter", role="context")
    rows = await store.chat_tail("test:7", heard[0], 4)
    assert [row.id for row in rows] == [heard[2], heard[3], answer, context]
