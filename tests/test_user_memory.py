"""Users own what a partner keeps about them: see it, correct it, delete it, take it home."""

from __future__ import annotations

import io
import json
import re
import zipfile
from typing import Any

import pytest

from bot.text.literal import unescape
from partners.memory import MemoryFile
from partners.memory_errors import MemoryInputError
from partners.memory_undo import undo
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply, ToolCallSpec


async def remember(harness: Harness, user: int, *facts: str, name: str = "Alice") -> None:
    for fact in facts:
        harness.llm.script(
            Reply(tool_calls=[ToolCallSpec("partner_memorize", {"op": "add", "text": fact})]),
            Reply(text="noted"),
        )
        await harness.send(dm(user, f"please remember: {fact}", name=name))
        await harness.settle()


async def command(harness: Harness, user: int, text: str, name: str = "Alice") -> str:
    before = len(harness.channel.sent)
    await harness.send(dm(user, text, name=name))
    await harness.settle()
    return "\n".join(m.text for m in harness.channel.sent[before:])


def partner_dir(harness: Harness) -> Any:
    return harness.app.catalog.require("example").dir


async def test_memory_shows_only_the_callers_entries(harness: Harness) -> None:
    await remember(harness, 42, "Alice plays the violin")
    await remember(harness, 43, "Bob collects stamps", name="Bob")
    owner_file = harness.app.owner_file
    await harness.app.memory.add(owner_file, "Owner secret plan", reason="", source="t")
    alice = await command(harness, 42, "/memory")
    assert "Alice plays the violin" in alice
    assert "stamps" not in alice and "Owner secret" not in alice
    assert "m_" in alice and "20" in alice  # ids and dates
    bob = await command(harness, 43, "/memory", name="Bob")
    assert "Bob collects stamps" in bob and "violin" not in bob


async def test_shared_scope_memory_explains_the_owner_manages_it(harness: Harness) -> None:
    (partner_dir(harness) / "preset.yml").write_text("name: Mira\nmemory_scope: shared\n")
    harness.app.catalog.reload()
    answer = await command(harness, 42, "/memory")
    assert "one shared memory" in answer and "owner manages it" in answer


async def test_forget_one_entry_removes_it_from_file_changelog_and_undo(harness: Harness) -> None:
    # the fact reaches memory from a message that does not contain it, so the changelog is
    # the only other place that holds it
    for fact in ("Alice's PIN is 4321", "Alice likes jazz"):
        harness.llm.script(
            Reply(tool_calls=[ToolCallSpec("partner_memorize", {"op": "add", "text": fact})]),
            Reply(text="noted"),
        )
        await harness.send(dm(42, "please remember what I just told you"))
        await harness.settle()
    user_file = MemoryFile(partner_dir(harness), "users/test-42.md")
    entry = next(e for e in await harness.app.memory.entries(user_file) if "4321" in e.text)
    assert entry.id
    changes = await harness.app.memory.changes(partner_dir(harness))
    add_change = next(c for c in changes if c.entry == entry.id)
    assert add_change.new == "Alice's PIN is 4321"
    answer = await command(harness, 42, f"/forget {entry.id}")
    assert "Forgotten" in answer
    assert "4321" not in user_file.path.read_text()
    assert "Alice likes jazz" in user_file.path.read_text()
    records = [
        json.loads(line)
        for line in (partner_dir(harness) / "changelog" / "changes.jsonl").read_text().splitlines()
    ]
    assert not [r for r in records if "4321" in json.dumps(r)]
    scrubbed = next(r for r in records if r["id"] == add_change.id)
    assert scrubbed["op"] == "forgotten" and scrubbed["old"] is None and scrubbed["new"] is None
    assert any(r["op"] == "add" and r["new"] == "Alice likes jazz" for r in records)
    with pytest.raises(MemoryInputError):
        await undo(harness.app.memory, partner_dir(harness), add_change.id, source="owner")
    assert "4321" not in user_file.path.read_text()


async def test_forget_all_needs_confirmation_then_clears_everything(harness_factory: Any) -> None:
    harness = await harness_factory(memory={"auto_memory": True})
    await remember(harness, 42, "Alice lives in Porto", "Alice has a dog named Rex")
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    harness.llm.script(
        Reply(text=json.dumps({"journal": {"summary": "Alice told me about Rex"}, "memory": []}))
    )
    await harness.app.reviewer.review(session.id)
    journal = next((partner_dir(harness) / "memory").glob("*.md"))
    assert "Rex" in journal.read_text()
    ask = await command(harness, 42, "/forget all")
    assert "cannot be undone" in ask and "/forget all confirm" in ask
    user_file = partner_dir(harness) / "users" / "test-42.md"
    assert "Porto" in user_file.read_text()
    done = await command(harness, 42, "/forget all confirm")
    assert "2 entries" in done
    assert "Porto" not in user_file.read_text() and "Rex" not in user_file.read_text()
    assert "Rex" not in journal.read_text()
    changelog = (partner_dir(harness) / "changelog" / "changes.jsonl").read_text()
    assert "Porto" not in changelog and "Rex" not in changelog
    hits = await harness.app.store.search("example", "Rex", ["user:test:42"], 10)
    assert hits and all(hit.role != "journal" for hit in hits)


async def test_review_never_re_adds_a_forgotten_fact(harness_factory: Any) -> None:
    harness = await harness_factory(memory={"auto_memory": True})
    await remember(harness, 42, "Alice is vegetarian")
    await command(harness, 42, "/forget all confirm")
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(42, "Cooking dinner tonight, I'm vegetarian as you know"))
    await harness.settle()
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    harness.llm.script(
        Reply(
            text=json.dumps(
                {
                    "journal": None,
                    "memory": [
                        {"file": "users/test-42.md", "op": "add", "text": "alice is  VEGETARIAN"},
                        {"file": "users/test-42.md", "op": "add", "text": "Cooks dinner at home"},
                    ],
                }
            )
        )
    )
    result = await harness.app.reviewer.review(session.id)
    text = (partner_dir(harness) / "users" / "test-42.md").read_text()
    assert "VEGETARIAN" not in text.upper() and "Cooks dinner at home" in text
    assert any("asked to forget" in s for s in result.skipped)


async def test_correction_in_conversation_edits_and_is_remembered_as_removed(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(memory={"auto_memory": True})
    await remember(harness, 42, "Lives in Lisbon")
    user_file = MemoryFile(partner_dir(harness), "users/test-42.md")
    entry = (await harness.app.memory.entries(user_file))[0]
    edit = ToolCallSpec(
        "partner_memorize",
        {"op": "edit", "target_id": entry.id, "text": "Lives in Faro", "reason": "moved"},
    )
    harness.llm.script(Reply(tool_calls=[edit]), Reply(text="Faro, got it"))
    await harness.send(dm(42, "I don't live in Lisbon any more, I moved to Faro"))
    await harness.settle()
    assert [e.text for e in await harness.app.memory.entries(user_file)] == ["Lives in Faro"]
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    harness.llm.script(
        Reply(
            text=json.dumps(
                {"memory": [{"file": "users/test-42.md", "op": "add", "text": "Lives in Lisbon"}]}
            )
        )
    )
    await harness.app.reviewer.review(session.id)
    assert [e.text for e in await harness.app.memory.entries(user_file)] == ["Lives in Faro"]


async def test_forget_history_removes_messages_from_search(harness: Harness) -> None:
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(42, "my locker combination is 1122"))
    await harness.settle()
    assert await harness.app.store.search("example", "locker", ["user:test:42"], 10)
    await command(harness, 42, "/forget history confirm")
    assert await harness.app.store.search("example", "locker", ["user:test:42"], 10) == []
    prompts = [s.system_prompt for s in await harness.app.store.sessions_of("example")]
    assert all("1122" not in p for p in prompts)


async def test_export_contains_entries_messages_and_journal(harness_factory: Any) -> None:
    harness = await harness_factory(memory={"auto_memory": True})
    await remember(harness, 42, "Alice runs marathons")
    await remember(harness, 43, "Bob hates running", name="Bob")
    session = await harness.app.store.open_session("test:42", "example")
    assert session is not None
    harness.llm.script(
        Reply(text=json.dumps({"journal": {"summary": "Alice's marathon plans"}, "memory": []}))
    )
    await harness.app.reviewer.review(session.id)
    await command(harness, 42, "/export")
    chat, name, data, caption = harness.channel.files[-1]
    assert chat.chat_id == "42" and name.endswith(".zip") and "export.json" in caption
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        exported = json.loads(archive.read("export.json"))
        summary = archive.read("summary.md").decode()
    assert [m["text"] for m in exported["memory"]] == ["Alice runs marathons"]
    assert any("marathon" in m["text"] for m in exported["messages"])
    assert "Bob" not in json.dumps(exported)
    assert exported["journal"] and "marathon" in exported["journal"][0]["text"]
    assert "Alice runs marathons" in summary
    assert "marathon plans" in summary and "<!--" not in summary and "chat:" not in summary
    assert "<!-- chat:test:42 -->" in exported["journal"][0]["text"]  # export.json: as kept


async def test_user_memory_commands_are_dm_only(harness: Harness) -> None:
    await harness.app.store.bind("test", "g1", "example", "command")
    from tests.conftest import group_message

    await harness.send(group_message("g1", 42, "/memory", name="Alice"))
    await harness.settle()
    assert "direct message" in harness.channel.sent[-1].text


LATIN_1 = "- Alice vit à Montréal\n- Alice aime le café\n".encode("latin-1")


def hand_edited_in_latin_1(harness: Harness) -> Any:
    path = partner_dir(harness) / "users" / "test-42.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(LATIN_1)
    return path


async def test_forget_on_a_file_in_another_encoding_answers_and_changes_nothing(
    harness: Harness,
) -> None:
    path = hand_edited_in_latin_1(harness)
    answer = await command(harness, 42, "/forget all confirm")
    assert "not readable" in answer and "owner has been told" in answer
    assert "Nothing was deleted" in answer
    assert path.read_bytes() == LATIN_1
    assert await harness.app.store.tombstones("example", "test:42") == set()
    assert await harness.app.store.unfinished_forgets() == []
    notices = [unescape(text) for text in harness.channel.texts(str(OWNER_ID))]
    assert len(notices) == 1 and "test-42.md" in notices[0] and "UTF-8" in notices[0]
    audit = await harness.app.store.audit_rows("forget_failed")
    assert [(row["actor"], row["detail"]["partner"]) for row in audit] == [("test:42", "example")]
    # the same for one entry; the owner, told already, is not told again at once
    again = await command(harness, 42, "/forget m_18c2f0a1b2c3d")
    assert "not readable" in again and path.read_bytes() == LATIN_1
    assert len(harness.channel.texts(str(OWNER_ID))) == 1
    assert len(await harness.app.store.audit_rows("forget_failed")) == 2


async def test_memory_and_export_answer_on_a_file_in_another_encoding(harness: Harness) -> None:
    path = hand_edited_in_latin_1(harness)
    shown = await command(harness, 42, "/memory")
    assert "Alice aime le caf" in shown
    await command(harness, 42, "/export")
    _chat, name, data, _caption = harness.channel.files[-1]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        exported = json.loads(archive.read("export.json"))
    assert len(exported["memory"]) == 2 and name.endswith(".zip")
    assert path.read_bytes() == LATIN_1


async def test_forget_all_with_a_journal_in_another_encoding_forgets_nothing_yet(
    harness: Harness,
) -> None:
    await remember(harness, 42, "Alice lives in Porto")
    journal = partner_dir(harness) / "memory" / "2020-01-01.md"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_bytes("# 2020-01-01\n## 10:00 · café with Alice (test:42)\n".encode("latin-1"))
    answer = await command(harness, 42, "/forget all confirm")
    assert "not readable" in answer and "Nothing was deleted" in answer
    assert "Porto" in (partner_dir(harness) / "users" / "test-42.md").read_text()
    assert b"caf\xe9" in journal.read_bytes()


async def test_export_holds_the_conversation_only_in_the_documented_format(
    harness: Harness,
) -> None:
    """export.json: entries with id/text/saved, and the conversation (the user's words and the
    partner's replies) — never tool traffic or notices — with times in UTC, text as written."""
    await remember(harness, 42, "Alice läuft Marathons")
    await command(harness, 42, "/export")
    _, name, data, _ = harness.channel.files[-1]
    assert re.fullmatch(r"example-\d{8}-my-data\.zip", name)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        raw = archive.read("export.json").decode()
    exported = json.loads(raw)
    assert "läuft" in raw  # readable, not \u-escaped
    [entry] = exported["memory"]
    assert set(entry) == {"id", "text", "saved"} and entry["id"].startswith("m_")
    assert entry["saved"] is not None and entry["saved"].endswith("+00:00")
    assert [(m["role"], m["text"]) for m in exported["messages"]] == [
        ("user", "please remember: Alice läuft Marathons"),
        ("assistant", "noted"),
    ]
    assert all(m["time"].endswith("+00:00") for m in exported["messages"])
    assert exported["partner"] == {"id": "example", "name": "Mira"}
