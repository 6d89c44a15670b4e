"""Forgetting is forgetting: after ``/forget`` no byte the gateway controls holds the text.

Each test plants a secret word in one kind of copy (memory file, changelog record, journal
file and row, day line, reminder, frozen prompt, session title, search index), checks it is
really there, forgets, and then searches every file under the data directory — the database,
its WAL, and a backup archive written after forgetting, unpacked — for the word.
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
import tarfile
import uuid
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.commands.memory import request_key
from bot.events import Inbound
from bot.store.backup import write_backup
from partners.memory import MemoryFile
from partners.memory_format import text_hash
from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCallSpec

USER = 42
USER_KEY = f"test:{USER}"
USER_FILE = f"users/test-{USER}.md"


def new_secret() -> str:
    return f"zq{uuid.uuid4().hex[:12]}"


def needles(secret: str) -> list[bytes]:
    """The word, and its tail: the search index stores a term after the prefix it shares with
    the term before it, so a leftover may hold only the end of the word."""
    return [secret.encode(), secret[-8:].encode()]


async def traces(harness: Harness, secret: str) -> list[str]:
    """Every file under the data directory whose bytes hold the secret, after writing a
    backup there and looking inside it too (its members are compressed)."""
    data_dir = harness.config.data_dir
    await write_backup(data_dir, data_dir / "backups" / "after.tar.gz", harness.app.store)
    found = []
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        name = str(path.relative_to(data_dir))
        if any(n in path.read_bytes() for n in needles(secret)):
            found.append(name)
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    content = archive.extractfile(member)
                    if content is not None and any(n in content.read() for n in needles(secret)):
                        found.append(f"{name}:{member.name}")
    return found


def partner_dir(harness: Harness) -> Path:
    return harness.app.catalog.require("example").dir


async def command(harness: Harness, text: str) -> str:
    before = len(harness.channel.sent)
    await harness.send(dm(USER, text))
    await harness.settle()
    return "\n".join(m.text for m in harness.channel.sent[before:])


async def memorize(harness: Harness, text: str) -> str:
    """The model saves ``text`` from a message that does not contain it; returns its id."""
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_memorize", {"op": "add", "text": text})]),
        Reply(text="noted"),
    )
    await harness.send(dm(USER, "please keep this in mind for me"))
    await harness.settle()
    entries = await harness.app.memory.entries(MemoryFile(partner_dir(harness), USER_FILE))
    entry = next(e for e in entries if e.text == text)
    assert entry.id
    return entry.id


async def review(
    harness: Harness, answer: dict[str, Any], user: int = USER, name: str = "Alice"
) -> None:
    """One review of the user's open session, answered with ``answer``."""
    harness.llm.script(Reply(text="ok"))
    await harness.send(
        dm(user, "that was a long day at the library, thanks for listening", name=name)
    )
    await harness.settle()
    session = await harness.app.store.open_session(f"test:{user}", "example")
    assert session is not None
    harness.llm.script(Reply(text=json.dumps({"memory": [], **answer})))
    await harness.app.reviewer.review(session.id)


async def day_line(harness: Harness, summary: str) -> None:
    """The nightly pass summarises today's journal (run as if it were tomorrow)."""
    partner = harness.app.catalog.require("example")
    harness.llm.script(Reply(text=json.dumps({"summary": summary})))
    result = await harness.app.consolidator.nightly(partner, datetime.now(UTC) + timedelta(1))
    assert result.day_line == summary


async def recall(harness: Harness, query: str) -> str:
    """What partner_search returns to the user's own partner for ``query``: the hits, or ""."""
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_search", {"query": query})]),
        Reply(text="let me think"),
    )
    await harness.send(dm(USER, "what did we talk about?"))
    await harness.settle()
    tool_messages = [m for m in harness.llm.requests[-1]["messages"] if m["role"] == "tool"]
    found = str(tool_messages[-1]["content"])
    return "" if found.startswith("no past messages match") else found


async def reviewing(harness_factory: Any) -> Harness:
    return await harness_factory(memory={"auto_memory": True})


# ---- one test per copy --------------------------------------------------------------------


async def test_forget_entry_leaves_no_trace_of_the_memory_file_entry(harness: Harness) -> None:
    secret = new_secret()
    entry_id = await memorize(harness, f"Alice's locker code is {secret}")
    await memorize(harness, "Alice likes jazz")
    placed = await traces(harness, secret)
    assert {f"partners/example/{USER_FILE}", "partners/example/changelog/changes.jsonl"} <= set(
        placed
    )
    answer = await command(harness, f"/forget {entry_id}")
    assert "Forgotten" in answer and secret not in answer
    assert await traces(harness, secret) == []
    user_file = partner_dir(harness) / USER_FILE
    assert "Alice likes jazz" in user_file.read_text()


async def test_forget_entry_leaves_no_trace_of_a_frozen_prompt(harness: Harness) -> None:
    secret = new_secret()
    entry_id = await memorize(harness, f"Alice's passport number is {secret}")
    await command(harness, "/new")
    harness.llm.script(Reply(text="hello again"))
    await harness.send(dm(USER, "good morning"))
    await harness.settle()
    assert secret in harness.llm.requests[-1]["messages"][0]["content"]
    await command(harness, f"/forget {entry_id}")
    assert await traces(harness, secret) == []


async def test_forget_entry_removes_the_journal_line_and_row_that_quote_it(
    harness_factory: Any,
) -> None:
    harness = await reviewing(harness_factory)
    secret = new_secret()
    fact = f"Alice's bike lock opens with {secret}"
    entry_id = await memorize(harness, fact)
    await review(harness, {"journal": {"summary": "Talked about bikes", "facts": [fact]}})
    assert secret in await recall(harness, secret)
    await command(harness, f"/forget {entry_id}")
    assert secret not in await recall(harness, secret)
    assert await traces(harness, secret) == []
    journal = next((partner_dir(harness) / "memory").glob("*.md")).read_text()
    assert "Talked about bikes" in journal  # the rest of the entry stays


async def test_forget_entry_removes_a_reminder_about_it(harness_factory: Any) -> None:
    harness = await reviewing(harness_factory)
    secret = new_secret()
    entry_id = await memorize(harness, f"Alice has her {secret} exam on 2099-06-01")
    await review(
        harness,
        {
            "reminders": [
                {"date": "2099-06-01", "about": f"her {secret} exam"},
                {"date": "2099-07-01", "about": "Alice's sister visits"},
            ]
        },
    )
    await command(harness, f"/forget {entry_id}")
    assert await traces(harness, secret) == []
    left = await harness.app.store.user_reminders("example", USER_KEY)
    assert [r["about"] for r in left] == ["Alice's sister visits"]


async def test_forget_all_leaves_no_trace_of_a_journal_passage(harness_factory: Any) -> None:
    harness = await reviewing(harness_factory)
    secret = new_secret()
    await memorize(harness, "Alice lives in Porto")
    await review(harness, {"journal": {"summary": f"Alice told me about {secret}"}})
    assert secret in await recall(harness, secret)
    placed = await traces(harness, secret)
    assert any(t.startswith("partners/example/memory/") for t in placed)
    assert "partners/example/changelog/changes.jsonl" in placed
    answer = await command(harness, "/forget all confirm")
    assert "1 entries and 1 diary passages" in answer
    assert await traces(harness, secret) == []


async def test_forget_all_leaves_no_trace_of_the_day_line(harness_factory: Any) -> None:
    harness = await reviewing(harness_factory)
    secret = new_secret()
    await memorize(harness, "Alice lives in Porto")
    await review(harness, {"journal": {"summary": "A chat with Alice about Porto"}})
    await day_line(harness, f"A day about {secret} and Porto")
    await command(harness, "/forget all confirm")
    assert await traces(harness, secret) == []
    journal = next((partner_dir(harness) / "memory").glob("*.md")).read_text()
    assert "> Day:" not in journal


async def test_forget_all_leaves_no_trace_in_edit_and_remove_records(harness: Harness) -> None:
    """What the user's file once held lives on only in its changelog: edits and removals."""
    edited, removed = new_secret(), new_secret()
    first = await memorize(harness, f"Alice's old address is {edited}")
    second = await memorize(harness, f"Alice's nickname is {removed}")
    changes = [
        {"op": "edit", "target_id": first, "text": "Alice moved house"},
        {"op": "remove", "target_id": second},
    ]
    for change in changes:
        harness.llm.script(
            Reply(tool_calls=[ToolCallSpec("partner_memorize", change)]), Reply(text="ok")
        )
        await harness.send(dm(USER, "that changed, please update it"))
        await harness.settle()
    assert "partners/example/changelog/changes.jsonl" in await traces(harness, edited)
    assert "partners/example/changelog/changes.jsonl" in await traces(harness, removed)
    await command(harness, "/forget all confirm")
    assert await traces(harness, edited) == []
    assert await traces(harness, removed) == []


async def test_forget_entry_leaves_no_trace_in_the_reviews_replace_record(
    harness_factory: Any,
) -> None:
    """A review edits by quoting text, so its record names no entry: only the text links it."""
    harness = await reviewing(harness_factory)
    secret = new_secret()
    await memorize(harness, f"Alice's gate code is {secret}")
    edit = {"file": USER_FILE, "op": "replace", "old": secret, "text": f"{secret}, new yearly"}
    await review(harness, {"memory": [edit]})
    user_file = MemoryFile(partner_dir(harness), USER_FILE)
    entry = (await harness.app.memory.entries(user_file))[0]
    assert entry.text.endswith("new yearly") and entry.id
    await command(harness, f"/forget {entry.id}")
    assert await traces(harness, secret) == []


async def test_forget_all_removes_the_users_reminders(harness_factory: Any) -> None:
    harness = await reviewing(harness_factory)
    secret = new_secret()
    await review(harness, {"reminders": [{"date": "2099-06-01", "about": f"the {secret} trip"}]})
    assert await harness.app.store.pending_reminders()
    await command(harness, "/forget all confirm")
    assert await traces(harness, secret) == []
    assert await harness.app.checkins.fire_reminder(1) == "already handled"


async def test_forget_history_leaves_no_trace_in_titles_index_wal_or_backup(
    harness: Harness,
) -> None:
    secret = new_secret()
    harness.llm.script(Reply(text="ok"), Reply(text="sure"))
    await harness.send(dm(USER, f"my wifi password is {secret}"))
    await harness.settle()
    await harness.send(dm(USER, "and the router is in the hall"))
    await harness.settle()
    session = await harness.app.store.open_session(f"test:{USER}", "example")
    assert session is not None and secret in session.title
    assert any(t.startswith("gateway.db") for t in await traces(harness, secret))
    answer = await command(harness, "/forget history confirm")
    assert "4 messages" in answer
    assert await traces(harness, secret) == []


async def test_forget_history_leaves_no_vector_behind(
    harness_factory: Any, fake_llm: FakeLLM
) -> None:
    """With semantic recall on, each message also has a vector: after forgetting no vector
    row of the user's messages remains, and no file holds the bytes of one."""
    harness = await harness_factory(embeddings={"base_url": fake_llm.base_url, "model": "e"})
    secret = new_secret()
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(USER, f"my locker code is {secret}"))
    await harness.settle()
    ids = await harness.app.store.user_message_ids("example", USER_KEY, ("user", "assistant"))
    vectors = await embedded(harness, "e", ids)
    assert any(vectors[0] in p.read_bytes() for p in harness.config.data_dir.glob("gateway.db*"))
    await command(harness, "/forget history confirm")
    assert await traces(harness, secret) == []
    assert vector_blobs(harness, ids) == []
    for path in harness.config.data_dir.rglob("gateway.db*"):
        assert not any(v in path.read_bytes() for v in vectors), path


async def test_a_message_forgotten_while_at_the_endpoint_gets_no_vector(
    harness_factory: Any, fake_llm: FakeLLM
) -> None:
    harness = await harness_factory(embeddings={"base_url": fake_llm.base_url, "model": "e"})
    harness.llm.script(Reply(text="ok"))
    await harness.send(dm(USER, "my locker code is 4711"))
    await harness.settle()
    ids = await harness.app.store.user_message_ids("example", USER_KEY, ("user", "assistant"))
    fake_llm.embedding_gate = asyncio.Event()
    embedder = harness.app.embedder
    assert embedder is not None
    embedder.wake()
    await fake_llm.wait_for_embeddings(1)  # the texts are at the endpoint
    await command(harness, "/forget history confirm")
    fake_llm.embedding_gate.set()
    async with asyncio.timeout(10):
        while await harness.app.store.embedding_watermark("e") < max(ids):
            embedder.wake()
            await asyncio.sleep(0.02)
    assert vector_blobs(harness, ids) == []


async def embedded(harness: Harness, model: str, ids: list[int]) -> list[bytes]:
    """Wake the embedder and wait until these messages have their vectors; returns them."""
    embedder = harness.app.embedder
    assert embedder is not None
    async with asyncio.timeout(10):
        while len(vector_blobs(harness, ids)) < len(ids):
            embedder.wake()
            await asyncio.sleep(0.02)
    assert await harness.app.store.embedding_backlog(model) == 0
    return vector_blobs(harness, ids)


def vector_blobs(harness: Harness, ids: list[int]) -> list[bytes]:
    marks = ", ".join("?" for _ in ids)
    with sqlite3.connect(harness.config.data_dir / "gateway.db") as db:
        rows = db.execute(
            f"SELECT vector FROM message_vectors WHERE message_id IN ({marks})", ids
        ).fetchall()
    return [row[0] for row in rows]


async def test_forgetting_leaves_another_users_journal_passages_alone(
    harness_factory: Any,
) -> None:
    """Bob said the same thing, and his display name even looks like Alice's marker: his
    journal passage and its search row are his, and stay."""
    harness = await reviewing(harness_factory)
    fact = "Supports the Porto football club"
    entry_id = await memorize(harness, fact)
    await review(harness, {"journal": {"summary": "Alice on football", "facts": [fact]}})
    bob = {"journal": {"summary": "Bob on football", "facts": [fact]}}
    await review(harness, bob, user=43, name=f"Bob ({USER_KEY})")
    await command(harness, f"/forget {entry_id}")
    await command(harness, "/forget all confirm")
    journal = next((partner_dir(harness) / "memory").glob("*.md")).read_text()
    assert "Alice on football" not in journal
    assert "Bob on football" in journal and fact in journal
    hits = await harness.app.store.search("example", "football", ["user:test:43"], 10)
    assert [hit.role for hit in hits] == ["journal"]
    changes = await harness.app.memory.changes(partner_dir(harness))
    assert any(c.op == "append" and "Bob on football" in (c.new or "") for c in changes)


async def test_export_leaves_out_a_passage_whose_name_mimics_the_users_marker(
    harness_factory: Any,
) -> None:
    harness = await reviewing(harness_factory)
    await review(harness, {"journal": {"summary": "Alice on tennis"}})
    await review(harness, {"journal": {"summary": "Bob on golf"}}, user=43, name=f"B ({USER_KEY})")
    await command(harness, "/export")
    _chat, _name, data, _caption = harness.channel.files[-1]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        exported = json.loads(archive.read("export.json"))
    passages = " ".join(j["text"] for j in exported["journal"])
    assert "Alice on tennis" in passages and "Bob on golf" not in passages


# ---- a recorded, resumable operation ------------------------------------------------------


async def crash(harness: Harness) -> None:
    """Stop as a crash would: nothing running gets to finish."""
    await harness.app.dispatcher.close(0)
    await harness.app.stop()


async def answer_to(harness: Harness, inbound: Inbound) -> str:
    before = len(harness.channel.sent)
    await harness.send(inbound)
    await harness.settle()
    return "\n".join(m.text for m in harness.channel.sent[before:])


async def test_forget_cut_off_after_the_file_was_emptied_is_finished_by_a_restart(
    harness_factory: Any,
) -> None:
    harness = await reviewing(harness_factory)
    secret = new_secret()
    await memorize(harness, f"Alice's diary key is {secret}")
    await memorize(harness, "Alice lives in Porto")
    await review(harness, {"journal": {"summary": f"Alice hid the {secret} key"}})
    asked = dm(USER, "/forget all confirm")
    forgetting = harness.app.forgetting
    partner = harness.app.catalog.require("example")
    planned = await forgetting.plan(partner, USER_KEY, "all", request=request_key(asked))
    assert planned is not None
    operation = await harness.app.store.begin_forget(planned)
    await forgetting.run_step(operation, "memory file")
    user_file = MemoryFile(partner.dir, USER_FILE)
    assert await harness.app.memory.entries(user_file) == []
    assert "partners/example/changelog/changes.jsonl" in await traces(harness, secret)
    await crash(harness)

    again = await reviewing(harness_factory)
    assert await traces(again, secret) == []
    hashes = {text_hash(f"Alice's diary key is {secret}"), text_hash("Alice lives in Porto")}
    assert await again.app.store.tombstones("example", USER_KEY) == hashes
    assert await again.app.store.unfinished_forgets() == []
    # the platform delivers the command again: it answers with what was forgotten
    answer = await answer_to(again, asked)
    assert "2 entries and 1 diary passages" in answer


async def test_forget_delivered_again_after_it_finished_answers_the_same(
    harness_factory: Any,
) -> None:
    harness = await harness_factory()
    await memorize(harness, "Alice lives in Porto")
    await memorize(harness, "Alice has a cat")
    asked = dm(USER, "/forget all confirm")
    assert "2 entries and 0 diary passages" in await answer_to(harness, asked)
    await harness.app.stop()
    again = await harness_factory()
    assert "2 entries and 0 diary passages" in await answer_to(again, asked)
    fresh = await answer_to(again, dm(USER, "/forget all confirm"))
    assert "nothing to forget" in fresh and "0 entries" not in fresh


async def test_forget_step_failing_on_disk_is_answered_and_finished_after_a_restart(
    harness_factory: Any,
) -> None:
    harness = await harness_factory()
    secret = new_secret()
    await memorize(harness, f"Alice's safe code is {secret}")
    changelog = partner_dir(harness) / "changelog" / "changes.jsonl"
    kept = changelog.read_bytes()
    changelog.unlink()
    changelog.mkdir()  # every write to the changelog now fails, as on a broken disk
    asked = dm(USER, "/forget all confirm")
    answer = await answer_to(harness, asked)
    assert "couldn't finish" in answer and "will be finished" in answer
    assert any("could not finish" in text for text in harness.channel.texts(str(OWNER_ID)))
    assert [row["actor"] for row in await harness.app.store.audit_rows("forget_failed")] == [
        USER_KEY
    ]
    assert secret in (partner_dir(harness) / USER_FILE).read_text()  # record first, then change
    assert len(await harness.app.store.unfinished_forgets()) == 1
    changelog.rmdir()
    changelog.write_bytes(kept)
    await harness.app.stop()

    again = await harness_factory()
    assert await traces(again, secret) == []
    assert "1 entries and 0 diary passages" in await answer_to(again, asked)
