"""One review that cannot be done is that review's failure, never everyone's: a poisonous answer
counts as a failed attempt (3 strikes, then skipped, audited, owner told) and the other due
sessions are reviewed in the same sweep; text no file can hold is cleaned, not fatal; the
nightly pass goes on past one bad file."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from adapters.telegram_format import render
from bot.store import SessionRow
from partners.memory import MemoryFile
from partners.review import MAX_ATTEMPTS, RETRY_SECONDS
from tests.conftest import OWNER_ID, Harness
from tests.fakes.fake_llm import Reply
from tests.test_review import chat, partner_dir, review_reply, reviewing

DEEP = 50_000
"""Nesting deeper than any JSON parser's recursion limit (Python's raises RecursionError)."""
TOO_DEEP_ANSWER = (
    '{"journal": {"summary": "deep", "facts": ' + "[" * DEEP + "]" * DEEP + '}, "memory": []}'
)
LONE_SURROGATE = "\\ud83d"
"""The JSON escape of half an emoji, as a provider that cut a surrogate pair sends it."""
USERS = {42: "Alice", 43: "Bob", 44: "Cleo"}
STORIES = {
    42: "My grandmother taught me to bake rye bread",
    43: "I am learning the cello at night school",
    44: "We are moving to a house by the sea in May",
}


async def three_due_sessions(harness: Harness) -> dict[int, SessionRow]:
    """Alice, Bob and Cleo each talked; their reviews are due in that order."""
    sessions = {}
    for order, (user, name) in enumerate(USERS.items()):
        sessions[user] = await chat(harness, user, STORIES[user], name=name)
        await harness.app.store.mark_review_due(sessions[user].id, order)
    return sessions


def answer_poison_for_alice(harness: Harness, poison: str) -> None:
    """Reviews of Alice's conversation get ``poison``; the others a good journal entry."""

    def respond(request: dict[str, Any]) -> Reply:
        prompt = request["messages"][-1]["content"]
        if STORIES[42] in prompt:
            return Reply(text=poison)
        user = next(u for u, story in STORIES.items() if story in prompt)
        return review_reply({"summary": f"{USERS[user]} shared news"})

    harness.llm.responder = respond


async def session(harness: Harness, session_id: str) -> SessionRow:
    row = await harness.app.store.session(session_id)
    assert row is not None
    return row


def owner_notices(harness: Harness) -> list[str]:
    return [m.text for m in harness.channel.sent if m.chat.chat_id == str(OWNER_ID)]


async def test_a_poison_answer_is_that_reviews_failure_and_the_others_are_reviewed(
    harness_factory: Any,
) -> None:
    harness = await reviewing(harness_factory)
    sessions = await three_due_sessions(harness)
    answer_poison_for_alice(harness, TOO_DEEP_ANSWER)

    assert await harness.app.reviewer.run_due() == 3

    for user in (43, 44):
        reviewed = await session(harness, sessions[user].id)
        assert reviewed.reviewed_upto > 0 and reviewed.review_attempts == 0
    alice = await session(harness, sessions[42].id)
    assert alice.reviewed_upto == 0 and alice.review_attempts == 1
    assert "nested" in (alice.review_error or "")
    assert owner_notices(harness) == []


async def test_a_poison_answer_three_times_is_skipped_audited_and_told(
    harness_factory: Any,
) -> None:
    harness = await reviewing(harness_factory)
    sessions = await three_due_sessions(harness)
    answer_poison_for_alice(harness, TOO_DEEP_ANSWER)
    start = harness.app.reviewer.clock()
    for attempt in range(MAX_ATTEMPTS):
        harness.app.reviewer.clock = lambda attempt=attempt: start + attempt * (RETRY_SECONDS + 1)
        await harness.app.reviewer.run_due()

    alice = await session(harness, sessions[42].id)
    assert alice.reviewed_upto > 0 and alice.review_due_at is None  # skipped, messages kept
    skipped = await harness.app.store.audit_rows("review_skipped")
    assert [row["detail"]["session"] for row in skipped] == [sessions[42].id]
    [notice] = owner_notices(harness)
    assert f"failed {MAX_ATTEMPTS} times for Mira" in notice
    harness.app.reviewer.clock = lambda: start + MAX_ATTEMPTS * (RETRY_SECONDS + 1)
    assert await harness.app.reviewer.run_due() == 0


async def test_a_lone_surrogate_in_the_answer_is_replaced_and_the_review_succeeds(
    harness_factory: Any,
) -> None:
    harness = await reviewing(harness_factory)
    sessions = await three_due_sessions(harness)
    answer = (
        '{"journal": {"summary": "Alice bakes ' + LONE_SURROGATE + ' rye bread"}, "memory": '
        '[{"file": "users/test-42.md", "op": "add", "text": "Bakes rye ' + LONE_SURROGATE + '"}]}'
    )
    answer_poison_for_alice(harness, answer)

    assert await harness.app.reviewer.run_due() == 3

    alice = await session(harness, sessions[42].id)
    assert alice.reviewed_upto > 0 and alice.review_attempts == 0
    root = partner_dir(harness)
    entries = await harness.app.memory.entries(MemoryFile(root, "users/test-42.md"))
    assert [e.text for e in entries] == ["Bakes rye \ufffd"]
    [journal] = (root / "memory").glob("*.md")
    assert "Alice bakes \ufffd rye bread" in journal.read_text(encoding="utf-8")


async def test_one_bad_file_does_not_stop_the_nightly_pass(harness_factory: Any) -> None:
    harness = await reviewing(harness_factory)
    root = partner_dir(harness)
    partner = harness.app.catalog.require("example")
    own, user = MemoryFile(root, "MEMORY.md"), MemoryFile(root, "users/test-42.md")
    for file in (own, user):
        for fact in ("likes green tea", "walks to work"):
            await harness.app.memory.add(file, fact, reason="", source="t")
    duplicate = await harness.app.memory.add(user, "enjoys green tea", reason="", source="t")
    # a folder named like a user's file: reading it fails with a real OSError, sorted first
    (root / "users" / "a-folder.md").mkdir()

    def respond(request: dict[str, Any]) -> Reply:
        prompt = request["messages"][-1]["content"]
        if "entries of MEMORY.md" in prompt:
            return Reply(text=TOO_DEEP_ANSWER)
        return Reply(text=json.dumps({"ops": [{"op": "remove", "id": duplicate.entry_id}]}))

    harness.llm.responder = respond
    [result] = await harness.app.consolidator.run_all()

    assert result.failed == ["MEMORY.md", "users/a-folder.md"] and result.changes
    kept = ["likes green tea", "walks to work"]
    assert [e.text for e in await harness.app.memory.entries(user)] == kept
    assert [e.text for e in await harness.app.memory.entries(own)] == kept
    assert (await harness.app.consolidator.nightly(partner)).skipped  # the day is recorded


async def test_two_sweeps_at_once_count_one_failure_once(harness_factory: Any) -> None:
    harness = await reviewing(harness_factory)
    sessions = await three_due_sessions(harness)
    answer_poison_for_alice(harness, TOO_DEEP_ANSWER)
    requests = len(harness.llm.requests)

    await asyncio.gather(harness.app.reviewer.run_due(), harness.app.reviewer.run_due())

    alice = await session(harness, sessions[42].id)
    assert alice.review_attempts == 1
    assert len(harness.llm.requests) == requests + len(USERS)


async def test_the_owners_notice_shows_the_session_title_as_text(harness_factory: Any) -> None:
    """The title is the user's first message: a link or emphasis in it stays literal."""
    harness = await reviewing(harness_factory)
    title = f"[verify](https://evil.example) **now** {STORIES[42]}"
    due = await chat(harness, 42, title, name="Alice")
    await harness.app.store.mark_review_due(due.id, 0)
    answer_poison_for_alice(harness, TOO_DEEP_ANSWER)
    start = harness.app.reviewer.clock()
    for attempt in range(MAX_ATTEMPTS):
        harness.app.reviewer.clock = lambda attempt=attempt: start + attempt * (RETRY_SECONDS + 1)
        await harness.app.reviewer.run_due()

    [notice] = owner_notices(harness)
    rendered = render(notice)
    assert "<a " not in rendered.html and "<b>" not in rendered.html
    assert "“[verify](https://evil.example) **now** My" in rendered.plain
