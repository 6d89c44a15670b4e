"""Memory and conversations from the owner's DM: read, remember, forget, journals, review now,
undo, consult, referenced transcripts and the session list."""

from __future__ import annotations

import json
from typing import Any

from bot.text.literal import unescape
from partners.memory import MemoryFile
from partners.tools import user_memory_file
from tests.admin_support import admin, partner_dir, say
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply

TRANSCRIPT_LABEL = (
    "Transcript of Mira's conversation “{title}” (for reference; not your conversation)"
)


async def owner_talks_with_mira(harness: Harness, *texts: str) -> None:
    await harness.app.store.upsert_chat(f"test:{OWNER_ID}", "test", str(OWNER_ID), None, "dm", None)
    await harness.app.store.select_partner(f"test:{OWNER_ID}", "example")
    for text in texts:
        await say(harness, OWNER_ID, text, f"reply to {text}", name="Owner")


def owner_changes(harness: Harness) -> list[str]:
    path = harness.app.owner_file.root / "changelog" / "changes.jsonl"
    return path.read_text().splitlines() if path.exists() else []


async def test_admin_memory_is_not_the_user_memory_command(harness: Harness) -> None:
    await admin(harness, "/admin remember The owner's birthday is in May")
    await owner_talks_with_mira(harness)
    administration = await admin(harness, "/admin memory")
    mine = await admin(harness, "/memory")
    assert "Your memory (every partner reads it" in administration
    assert "birthday is in May" in administration
    assert "birthday" not in mine and mine != administration


async def test_memory_of_a_partner_and_of_one_user(harness: Harness) -> None:
    partner = harness.app.catalog.require("example")
    await harness.app.memory.add(
        MemoryFile(partner.dir, "MEMORY.md"), "Mira likes rain", reason="", source="t"
    )
    await harness.app.memory.add(
        user_memory_file(partner, "test:42"), "Alice plays violin", reason="", source="t"
    )
    own = await admin(harness, "/admin memory example")
    assert "Mira likes rain" in own and "violin" not in own and "test-42" in own
    alice = await admin(harness, "/admin memory example 42")
    assert "What Mira keeps about test:42" in alice and "Alice plays violin" in alice
    assert "no partner 'ghost'" in await admin(harness, "/admin memory ghost")


async def test_remember_adds_to_the_owners_memory_once(harness: Harness) -> None:
    answer = await admin(harness, "/admin remember I am vegetarian")
    assert answer.startswith("Remembered (entry m_")
    assert "- I am vegetarian <!-- m_" in harness.app.owner_file.path.read_text()
    assert "Already in your memory" in await admin(harness, "/admin remember i am  VEGETARIAN")
    assert "limit is 240" in await admin(harness, "/admin remember " + "x" * 241)


async def test_forget_removes_an_owner_entry_for_good(harness: Harness) -> None:
    await admin(harness, "/admin remember My PIN is 4321")
    [entry] = await harness.app.memory.entries(harness.app.owner_file)
    added = json.loads(owner_changes(harness)[0])["id"]
    answer = await admin(harness, f"/admin forget {entry.id}")
    assert answer == "Forgotten: “My PIN is 4321” (MEMORY.md). This cannot be undone."
    assert "4321" not in harness.app.owner_file.path.read_text()
    assert all("4321" not in line for line in owner_changes(harness))
    refused = await admin(harness, f"/admin undo {added}")
    assert "forgotten" in refused and "cannot be undone" in refused
    assert "4321" not in harness.app.owner_file.path.read_text()
    assert "no entry" in await admin(harness, f"/admin forget {entry.id}")
    assert "not an entry id" in await admin(harness, "/admin forget 42")


async def test_forget_finds_a_partner_entry_in_a_users_file(harness: Harness) -> None:
    partner = harness.app.catalog.require("example")
    file = user_memory_file(partner, "test:42")
    result = await harness.app.memory.add(
        file, "Alice's address is 5 Elm St", reason="", source="t"
    )
    answer = await admin(harness, f"/admin forget example {result.entry_id}")
    assert "Forgotten: “Alice's address is 5 Elm St” (users/test-42.md)" in answer
    assert "Elm" not in file.path.read_text()
    changelog = (partner.dir / "changelog" / "changes.jsonl").read_text()
    assert "Elm" not in changelog
    assert "no entry m_1 in Mira's memory" in await admin(harness, "/admin forget example m_1")


async def test_journal_shows_a_day_without_chat_markers(harness: Harness) -> None:
    journal = partner_dir(harness) / "memory" / "2024-03-05.md"
    journal.write_text(
        "# 2024-03-05\n\n## 10:00 · Tea club <!-- chat:test:g1 -->\n> Summary: tea\n"
    )
    # the journal is the model's text: shown as written, its Markdown escaped (bot/text/literal.py)
    shown = unescape(await admin(harness, "/admin journal example 2024-03-05"))
    assert "## 10:00 · Tea club" in shown and "> Summary: tea" in shown and "chat:" not in shown
    missing = await admin(harness, "/admin journal example 2024-03-06")
    assert "no journal for 2024-03-06" in missing and "2024-03-05" in missing
    assert "not a date" in await admin(harness, "/admin journal example yesterday")


async def test_review_runs_now_and_reports_what_changed(harness: Harness) -> None:
    await owner_talks_with_mira(harness, "I went hiking in the Alps this weekend", "It was great")
    harness.llm.script(
        Reply(
            text=json.dumps(
                {
                    "journal": {"summary": "The owner went hiking in the Alps"},
                    "memory": [{"file": "MEMORY.md", "op": "add", "text": "Owner loves hiking"}],
                }
            )
        )
    )
    answer = await admin(harness, "/admin review example")
    assert "Reviewed 1 session(s) of Mira: 1 journal entr(ies)." in answer
    assert "MEMORY.md add: Owner loves hiking (c_" in answer
    assert "Owner loves hiking" in (partner_dir(harness) / "MEMORY.md").read_text()
    assert await admin(harness, "/admin review example") == "Nothing new to review for Mira."


async def test_undo_reverses_one_change(harness: Harness) -> None:
    await admin(harness, "/admin remember I live in Lisbon")
    change = json.loads(owner_changes(harness)[0])["id"]
    answer = await admin(harness, f"/admin undo {change}")
    assert answer.startswith(f"Undid {change} (MEMORY.md add) as c_")
    assert "Lisbon" not in harness.app.owner_file.path.read_text()
    assert "no change c_123 in any changelog" in await admin(harness, "/admin undo c_123")
    assert "not a change id" in await admin(harness, "/admin undo yesterday")


async def test_consult_answers_as_the_partner(harness: Harness) -> None:
    harness.llm.script(Reply(text="Jasmine, I think."))
    answer = await admin(harness, "/admin consult example What tea does the owner like?")
    assert answer == "Mira: Jasmine, I think."
    request = harness.llm.requests[-1]
    assert "Mira" in request["messages"][0]["content"]
    assert "What tea does the owner like?" in request["messages"][-1]["content"]
    assert {t["function"]["name"] for t in request["tools"]} >= {"partner_read"}
    kinds = {r["kind"] for r in await harness.app.store.usage("")}
    assert kinds == {"consult"}
    assert "no partner 'ghost'" in await admin(harness, "/admin consult ghost hello?")


def _transcript_messages(request: dict[str, Any]) -> list[str]:
    return [
        m["content"]
        for m in request["messages"]
        if m["role"] == "user" and str(m["content"]).startswith("Transcript of ")
    ]


async def _alice_session(harness: Harness) -> str:
    await say(harness, 42, "I am planning a trip to Kyoto", "How exciting!")
    await say(harness, 42, "In April, for the blossoms", "Lovely season.")
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    return session.id


async def test_transcript_is_labelled_and_used_in_the_next_turns_of_that_session(
    harness: Harness,
) -> None:
    session_id = await _alice_session(harness)
    answer = await admin(harness, f"/admin transcript example {session_id[:8]}")
    label = TRANSCRIPT_LABEL.format(title="I am planning a trip to Kyoto")
    assert label in answer and "4 messages" in answer
    for question in ("What is Alice planning?", "When?"):
        harness.llm.script(Reply(text="She plans Kyoto."))
        await harness.send(dm(OWNER_ID, question, name="Owner"))
        await harness.settle()
        request = harness.llm.requests[-1]
        [transcript] = _transcript_messages(request)
        assert transcript.startswith(label)
        assert "Alice: I am planning a trip to Kyoto" in transcript
        assert "Mira: Lovely season." in transcript
        contents = [m["content"] for m in request["messages"]]
        assert contents.index(transcript) < len(contents) - 1
        assert contents[-1].endswith(question)
    await admin(harness, "/new")
    harness.llm.script(Reply(text="Who?"))
    await harness.send(dm(OWNER_ID, "And Alice?", name="Owner"))
    await harness.settle()
    assert _transcript_messages(harness.llm.requests[-1]) == []


async def test_transcript_is_bounded_to_its_newest_part(harness: Harness) -> None:
    for i in range(12):
        await say(harness, 43, f"story part {i} " + "word " * 200, f"ok {i}", name="Bob")
    session = await harness.app.store.open_session("test:43", "example")
    assert session is not None
    await admin(harness, f"/admin transcript example {session.id}")
    harness.llm.script(Reply(text="long story"))
    await harness.send(dm(OWNER_ID, "summarise Bob", name="Owner"))
    await harness.settle()
    [transcript] = _transcript_messages(harness.llm.requests[-1])
    assert len(transcript) < 8000 + 300
    assert "… (earlier part omitted)" in transcript
    assert "Bob: story part 11" in transcript and "Bob: story part 0 " not in transcript


async def test_transcript_refuses_unknown_or_bad_session_ids(harness: Harness) -> None:
    await _alice_session(harness)
    assert "has no session abcdef12" in await admin(harness, "/admin transcript example abcdef12")
    assert "not a session id" in await admin(harness, "/admin transcript example xyz")
    assert "no partner 'ghost'" in await admin(harness, "/admin transcript ghost abcdef12")


async def test_sessions_lists_a_partners_sessions_optionally_for_one_user(harness: Harness) -> None:
    await say(harness, 42, "hello from Alice", "hi Alice")
    await say(harness, 43, "hello from Bob", "hi Bob", name="Bob")
    alice = await harness.app.store.open_session("test:42", "example")
    assert alice is not None
    listing = await admin(harness, "/admin sessions example")
    assert (
        f"{alice.id[:8]} · " in listing
        and "“hello from Alice” · test:42 · 2 messages, open" in listing
    )
    assert "hello from Bob" in listing
    only_alice = await admin(harness, "/admin sessions example 42")
    assert "hello from Alice" in only_alice and "Bob" not in only_alice
    assert "no sessions with test:99" in await admin(harness, "/admin sessions example 99")
