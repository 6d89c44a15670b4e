"""Moving a SQLite gateway onto PostgreSQL (``companion database copy``): every row of every
table arrives with its ids, search answers the same, new rows are numbered past the copied
ones, memory files become document rows, and a copy that cannot finish leaves the target
empty while the SQLite file stays as it was."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.store import (
    ConfirmationRow,
    DeliveryRetry,
    ForgetOperation,
    NewMedia,
    NewMessage,
    NewToolCall,
    NewUsage,
    NewVector,
    Store,
    StoreError,
)
from bot.store.migrations import SCHEMA
from bot.store.opening import open_store
from bot.store.postgres.copy import (
    DERIVED_TABLES,
    NewDocument,
    TargetNotEmpty,
    copy_to_postgres,
)
from bot.store.postgres.copy_source import SourceNotCurrent
from partners.catalog import PartnerCatalog
from partners.greetings import greetings_of
from partners.partner_rows import PartnerRows
from tests.test_cli import companion

WORDS = (
    "tea",
    "garden",
    "kitten",
    "island",
    "rain",
    "train",
    "lyon",
    "hiking",
    "coffee",
    "book",
) + (
    "東京",
    "红叶",
    "咖啡",
)


async def filled_sqlite(path: Path) -> None:
    """A SQLite gateway's database with a row in every table that holds data, written through
    the Store API as the gateway writes it."""
    store = await open_store(path)
    try:
        await fill(store)
    finally:
        await store.close()


async def fill(store: Store) -> None:
    await store.upsert_user("telegram:5", "telegram", "5", "Alice", "alice")
    await store.upsert_user("telegram:6", "telegram", "6", "Bob", None)
    await store.set_user_timezone("telegram:5", "Europe/Paris")
    await store.set_voice_mode("telegram:5", "voice")
    await store.upsert_chat("telegram:5", "telegram", "5", None, "private", None)
    await store.upsert_chat("telegram:-9", "telegram", "-9", None, "group", "Hikers")
    await store.select_partner("telegram:5", "luna")
    await store.bind("telegram", "-9", "luna", "command")
    await store.update_seen("telegram", "1001")
    await store.reject_update("telegram", "1002")
    await store.set_search_language("luna", "french")
    session = await store.create_session(
        partner_id="luna",
        chat_key="telegram:5",
        user_key="telegram:5",
        audience="user:telegram:5",
        system_prompt="You are Luna.",
        title="first words",
    )
    messages = []
    for number in range(60):
        words = " ".join(WORDS[(number * 7 + k) % len(WORDS)] for k in range(1 + number % 5))
        private = number % 3 != 0
        messages.append(
            NewMessage(
                "telegram:5" if private else "telegram:-9",
                ("user", "assistant", "context")[number % 3],
                f"{words} number {number}",
                "user:telegram:5" if private else "chat:telegram:-9",
                session_id=session.id if private else None,
                partner_id="luna",
                user_key="telegram:5",
                speaker="Alice",
                created_at=1_000_000.0 + number,
                dedup_key=f"telegram:5:{number}",
            )
        )
    ids = [i for i in await store.add_messages(messages) if i is not None]
    await store.add_media(ids[0], [NewMedia("voice", "file-1", "audio/ogg", 3.5, 2048)])
    await store.record_chunk(ids[1], 0, "tg-77")
    await store.add_tool_call(
        NewToolCall(
            ids[1],
            "telegram:5",
            session.id,
            "luna",
            "telegram:5",
            "clock",
            "now",
            "{}",
            "12:00",
            False,
            1_000_001.0,
        )
    )
    await store.save_vectors(
        "embed-1", [NewVector(ids[2], messages[2].text, 2, b"\x00\x01\x02\x03")], upto=ids[2]
    )
    pending = await store.add_message(
        NewMessage(
            "telegram:5",
            "user",
            "still waiting for an answer",
            "user:telegram:5",
            status="pending",
            queue_key="telegram:5",
            partner_id="luna",
            user_key="telegram:5",
        )
    )
    assert pending is not None
    await store.delete_messages([ids[10]])  # a hole in the ids, as forgetting leaves one
    await store.add_usage("2026-01-02", "luna", "chat", "m", 120, 40)
    await store.add_units("2026-01-02", "luna", "speech", "tts", 12.5)
    await store.book_usage(
        NewUsage("2026-01-02", "luna", "gate", "m", 30, 1, "telegram:-100", "2026-01-03")
    )
    await store.audit("owner", "bind", chat="-9")
    await store.audit("owner", "settings", key="memory.review_turns")
    await store.put_setting("memory.review_turns", "4")
    await store.create_pairing("ABC123", "telegram:6", 3600)
    await store.add_claim_code("hash-1", "discord", 600)
    await store.set_checkins("luna", "telegram:5", True)
    await store.record_checkin("luna", "telegram:5", "morning", False, 1_000_100.0)
    await store.add_reminder("luna", "telegram:5", "2026-02-01", "the dentist")
    await store.add_tombstones("luna", "telegram:5", ["h1", "h2"])
    await store.begin_forget(
        ForgetOperation(
            "luna", "telegram:5", "entry", request="forget-1", entry_ids=("m_1",), hashes=("h1",)
        )
    )
    await store.add_transcript_ref(session.id, session.id, 5)
    await store.note_rest_notice("budget", "luna")
    await store.add_web_login("token-hash", 600)
    await store.save_document("partners/luna", "MEMORY.md", b"- likes tea <!-- m_1 -->\n", 0)
    await store.redeem_claim("hash-1", "discord", "discord:8")
    await store.redeem_web_login("token-hash", "session-hash", "csrf", 600)
    await store.set_status(ids[3], "delivering")
    await store.schedule_delivery_retry(DeliveryRetry(ids[3], 1, 1_000.0, 1_060.0, "429"))
    await store.set_message_text(ids[4], "a transcript replaced the placeholder")
    await store.register_worker("w1", "host", 4242)
    await store.claim_queue_keys("w1", 30.0, 5)
    await store.claim_shards("w1", 2, 30.0, 1)
    leader = await store.lead("w1", 30.0)
    await store.record_job_run("nightly", "2026-01-02", leader)
    question = ConfirmationRow("0123456789", "telegram:5", "telegram:5", 1_000.0, 1_120.0)
    await store.add_confirmation(question, 0.0)
    await store.answer_confirmation(question.id, True, 1_001.0)


def sqlite_tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows as SQLite holds them (the FTS5 index is SQLite's own)."""
    with sqlite3.connect(path) as db:
        names = [
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not row[0].startswith(("sqlite_", "message_index"))
        ]
        return {name: sorted(db.execute(f"SELECT * FROM {name}"), key=repr) for name in names}


async def postgres_tables(url: str, names: list[str], columns_of: Path) -> dict[str, list[Any]]:
    """The same tables' rows on PostgreSQL, with SQLite's columns in SQLite's order."""
    with sqlite3.connect(columns_of) as source:
        columns = {
            name: [row[1] for row in source.execute(f"PRAGMA table_info({name})")] for name in names
        }
    db = await asyncpg.connect(url)
    try:
        return {
            name: sorted(
                (
                    tuple(row)
                    for row in await db.fetch(f"SELECT {', '.join(columns[name])} FROM {name}")
                ),
                key=repr,
            )
            for name in names
        }
    finally:
        await db.close()


async def postgres_counts(url: str) -> dict[str, int]:
    db = await asyncpg.connect(url)
    try:
        names = await db.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        )
        return {
            row[0]: int(await db.fetchval(f"SELECT count(*) FROM {row[0]}"))
            for row in names
            if row[0] not in ("schema_version", *DERIVED_TABLES)
        }
    finally:
        await db.close()


async def each(documents: list[NewDocument]) -> AsyncIterator[NewDocument]:
    for document in documents:
        yield document


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
async def source(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "gateway.db"
    await filled_sqlite(path)
    return path


async def test_every_table_arrives_with_its_ids(source: Path, postgres_database: str) -> None:
    copied = await copy_to_postgres(source, postgres_database, batch_rows=7)
    before = sqlite_tables(source)
    after = await postgres_tables(postgres_database, list(before), source)
    for name, rows in before.items():
        assert after[name] == rows, name
    assert {name: count for name, count in copied.items() if count} == {
        name: len(rows) for name, rows in before.items() if rows
    }
    assert copied["messages"] == 60  # 60 + the pending one - the forgotten one
    assert [name for name, rows in before.items() if not rows] == []  # each was compared


SEARCHES = ["tea", "kitten garden", "東京", "咖啡 红叶", "hiking sister", "number 42"]
AUDIENCES: list[list[str] | None] = [["user:telegram:5"], ["chat:telegram:-9"], None]


async def found_ids(location: Path | str) -> list[list[int]]:
    """The ids each search finds, in order, for each set of audiences."""
    store = await open_store(location)
    try:
        return [
            [hit.message_id for hit in await store.search("luna", query, audiences, 20)]
            for query in SEARCHES
            for audiences in AUDIENCES
        ]
    finally:
        await store.close()


async def test_postgres_finds_what_sqlite_found(source: Path, postgres_database: str) -> None:
    expected = await found_ids(source)
    await copy_to_postgres(source, postgres_database)
    assert await found_ids(postgres_database) == expected
    assert sum(bool(ids) for ids in expected) > len(expected) // 2  # orders were compared


async def test_new_rows_are_numbered_past_the_copied_ones(
    source: Path, postgres_database: str
) -> None:
    with sqlite3.connect(source) as db:
        last_message = db.execute("SELECT max(id) FROM messages").fetchone()[0]
        last_audit = db.execute("SELECT max(id) FROM audit").fetchone()[0]
    await copy_to_postgres(source, postgres_database)
    store = await open_store(postgres_database)
    try:
        new_id = await store.add_message(
            NewMessage("telegram:5", "user", "after the move", "user:telegram:5", partner_id="luna")
        )
        await store.audit("owner", "moved")
        reminder = await store.add_reminder("luna", "telegram:5", "2026-03-01", "a new one")
    finally:
        await store.close()
    assert new_id is not None and new_id > last_message
    db = await asyncpg.connect(postgres_database)
    try:
        moved = await db.fetchval("SELECT id FROM audit WHERE action = 'moved'")
    finally:
        await db.close()
    assert moved > last_audit
    assert reminder


async def test_a_second_copy_is_refused_and_changes_nothing(
    source: Path, postgres_database: str
) -> None:
    await copy_to_postgres(source, postgres_database)
    counts = await postgres_counts(postgres_database)
    with pytest.raises(TargetNotEmpty, match="empty database") as refused:
        await copy_to_postgres(source, postgres_database)
    assert "messages" in str(refused.value)
    assert await postgres_counts(postgres_database) == counts


async def test_a_failure_mid_copy_leaves_the_target_empty(
    source: Path, postgres_database: str
) -> None:
    store = await open_store(source)
    try:
        # PostgreSQL's text cannot hold a NUL character; SQLite's can: a late row, so the
        # copy fails after earlier tables and batches of this one went over
        await store.add_message(NewMessage("telegram:5", "user", "half\x00way", "user:telegram:5"))
    finally:
        await store.close()
    digest = file_digest(source)
    with pytest.raises(StoreError, match="copying messages") as failed:
        await copy_to_postgres(source, postgres_database, batch_rows=3)
    assert "nothing was copied" in str(failed.value)
    assert set((await postgres_counts(postgres_database)).values()) == {0}
    assert file_digest(source) == digest


async def test_the_sqlite_database_is_never_changed(source: Path, postgres_database: str) -> None:
    digests = {p.name: file_digest(p) for p in source.parent.iterdir() if p.is_file()}
    await copy_to_postgres(source, postgres_database)
    after = {p.name: file_digest(p) for p in source.parent.iterdir() if p.is_file()}
    assert {name: after.get(name) for name in digests} == digests


async def test_memory_files_become_document_rows(source: Path, postgres_database: str) -> None:
    files = [
        NewDocument("partners/luna", "SOUL.md", b"calm\r\n", 1_000.0),
        NewDocument("partners/luna", "users/telegram_5.md", b"- likes rain\n", 1_001.0),
        NewDocument("owner", "MEMORY.md", "- 东京 trip\n".encode(), 1_002.0),
    ]
    copied = await copy_to_postgres(source, postgres_database, documents=each(files))
    store = await open_store(postgres_database)
    try:
        for file in files:
            row = await store.document(file.namespace, file.path)
            assert row is not None and row.content == file.content
            assert row.version == 1
        # the row the SQLite database already held is copied too
        memory = await store.document("partners/luna", "MEMORY.md")
        assert memory is not None and memory.content == b"- likes tea <!-- m_1 -->\n"
    finally:
        await store.close()
    assert copied["documents"] == 4


async def test_a_document_both_in_rows_and_files_is_refused(
    source: Path, postgres_database: str
) -> None:
    twice = [NewDocument("partners/luna", "MEMORY.md", b"- a file's copy\n", 1_000.0)]
    with pytest.raises(StoreError, match="partners/luna/MEMORY.md"):
        await copy_to_postgres(source, postgres_database, documents=each(twice))
    assert set((await postgres_counts(postgres_database)).values()) == {0}


async def test_a_source_at_an_older_schema_is_refused(source: Path, postgres_database: str) -> None:
    with sqlite3.connect(source) as db:
        db.execute(f"PRAGMA user_version = {len(SCHEMA) - 1}")
    with pytest.raises(SourceNotCurrent, match="companion run"):
        await copy_to_postgres(source, postgres_database)
    assert not any((await postgres_counts(postgres_database)).values())


async def test_a_missing_source_is_named(tmp_path: Path, postgres_database: str) -> None:
    with pytest.raises(StoreError, match="no SQLite database"):
        await copy_to_postgres(tmp_path / "nowhere.db", postgres_database)


async def test_companion_database_copy_moves_files_and_hides_the_password(
    source: Path, postgres_database: str, tmp_path: Path
) -> None:
    data = source.parent
    (data / "partners" / "luna" / "users").mkdir(parents=True)
    (data / "partners" / "luna" / "users" / "telegram_5.md").write_text("- likes rain\n")
    (data / "owner").mkdir()
    (data / "owner" / "MEMORY.md").write_text("- the owner's note\n")
    config = tmp_path / "config.toml"
    config.write_text(
        '[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-test"\nmodel = "m"\n'
        f'[storage]\ndata_dir = "{data}"\n',
        encoding="utf-8",
    )
    with_password = postgres_database.replace(
        "postgresql://postgres@", "postgresql://postgres:s3cret@"
    )
    code, out, err = await companion(config, "database", "copy", "--to", with_password)
    assert code == 0, err
    assert "s3cret" not in out + err
    assert "messages" in out and "60" in out
    store = await open_store(postgres_database)
    try:
        row = await store.document("partners/luna", "users/telegram_5.md")
        owner = await store.document("owner", "MEMORY.md")
    finally:
        await store.close()
    assert row is not None and row.content == b"- likes rain\n"
    assert owner is not None and owner.content == b"- the owner's note\n"

    code, out, err = await companion(config, "database", "copy", "--to", with_password)
    assert code == 2
    assert "was copied into" in err and "s3cret" not in out + err
    assert "s3cret" not in (data / "copied-to-database.txt").read_text()


async def test_companion_database_copy_moves_the_partners_too(
    source: Path, postgres_database: str, tmp_path: Path
) -> None:
    luna = source.parent / "partners" / "luna"
    luna.mkdir(parents=True)
    (luna / "preset.yml").write_text("name: Luna\n# her own comment\n")
    (luna / "SOUL.md").write_text("You are {{partner}}, calm as the sea.\n")
    (luna / "avatar.png").write_bytes(b"\x89PNG\r\n\x1a\n-luna")
    (luna / "card.json").write_text('{"first_mes": "Hello from the lighthouse"}\n')
    config = tmp_path / "config.toml"
    config.write_text(
        '[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-test"\nmodel = "m"\n'
        f'[storage]\ndata_dir = "{source.parent}"\n',
        encoding="utf-8",
    )
    code, _, err = await companion(config, "database", "copy", "--to", postgres_database)
    assert code == 0, err
    store = await open_store(postgres_database)
    try:
        catalog = PartnerCatalog(tmp_path / "elsewhere" / "partners", PartnerRows(store))
        await catalog.refresh()
        preset = await store.document("partners/luna", "preset.yml")
    finally:
        await store.close()
    partner = catalog.require("luna")
    assert (partner.name, partner.avatar_image) == ("Luna", b"\x89PNG\r\n\x1a\n-luna")
    assert greetings_of(partner) == ["Hello from the lighthouse"]
    assert preset is not None and preset.content == b"name: Luna\n# her own comment\n"
