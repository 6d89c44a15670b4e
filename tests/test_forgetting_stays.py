"""Forgotten stays forgotten on PostgreSQL: after ``companion database copy`` the database is the
only truth, so no restart, second copy or file left in the data directory brings back what a user
or the owner forgot (docs/architecture.md "Decisions": "Several workers (PostgreSQL): the database
is the only truth", "Forgetting is forgetting").

Each test runs a SQLite gateway first, with memory kept as files, copies it with the real
``companion database copy``, forgets on the PostgreSQL gateway, and then looks for the text
in what users are shown and in every document row."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from bot.config.model import Config
from partners.memory import MemoryFile
from partners.review import ReviewResult
from tests.conftest import OWNER_ID, Harness, HarnessFactory, dm
from tests.fakes.fake_llm import Reply
from tests.postgres_server import PostgresServer
from tests.test_cli import companion, write_config
from tests.test_forgetting import USER_FILE, command, memorize, new_secret


async def database_copy(config: Config, url: str) -> tuple[int, str, str]:
    """``companion database copy --to url`` on the harness's data directory."""
    cli_config = write_config(config.data_dir.parent, config.llm.base_url or "")
    return await companion(cli_config, "database", "copy", "--to", url)


async def rows_holding(url: str, text: str) -> list[str]:
    """The document rows whose bytes hold ``text`` (none in a database without the table)."""
    db = await asyncpg.connect(url)
    try:
        if await db.fetchval("SELECT to_regclass('documents')") is None:
            return []
        rows = await db.fetch(
            "SELECT namespace, path FROM documents WHERE position($1::bytea in content) > 0",
            text.encode(),
        )
    finally:
        await db.close()
    return [f"{row[0]}/{row[1]}" for row in rows]


async def on_postgres(harness_factory: HarnessFactory, url: str) -> Harness:
    harness: Harness = await harness_factory(storage={"database_url": url})
    return harness


async def owner_says(harness: Harness, text: str) -> str:
    before = len(harness.channel.sent)
    await harness.send(dm(OWNER_ID, text, name="Owner"))
    await harness.settle()
    return "\n".join(m.text for m in harness.channel.sent[before:])


async def copied_gateway_with_memories(
    harness_factory: HarnessFactory, url: str, *texts: str
) -> Harness:
    """A SQLite gateway where the user's partner memorised ``texts`` (files), stopped and
    copied into ``url``."""
    sqlite = await harness_factory()
    for text in texts:
        await memorize(sqlite, text)
    await sqlite.app.stop()
    code, _out, err = await database_copy(sqlite.config, url)
    assert code == 0, err
    return sqlite


async def test_forget_all_stays_forgotten_after_a_restart(
    postgres_database: str, harness_factory: HarnessFactory
) -> None:
    secret = new_secret()
    sqlite = await copied_gateway_with_memories(
        harness_factory, postgres_database, f"Alice's locker code is {secret}", "Alice has a cat"
    )
    user_file = sqlite.config.data_dir / "partners" / "example" / USER_FILE
    assert secret in user_file.read_text()  # the file the copy read is still there

    worker = await on_postgres(harness_factory, postgres_database)
    assert "2 entries" in await command(worker, "/forget all confirm")
    await worker.app.stop()

    restarted = await on_postgres(harness_factory, postgres_database)
    shown = await command(restarted, "/memory")
    assert secret not in shown and "cat" not in shown
    assert "doesn't remember anything" in shown
    assert await rows_holding(postgres_database, secret) == []
    assert await rows_holding(postgres_database, "Alice has a cat") == []


async def test_admin_forget_of_the_owners_memory_stays_forgotten_after_a_restart(
    postgres_database: str, harness_factory: HarnessFactory
) -> None:
    secret = new_secret()
    sqlite = await harness_factory()
    assert "Remembered" in await owner_says(sqlite, f"/admin remember my vault code is {secret}")
    owner_file = sqlite.config.data_dir / "owner" / "MEMORY.md"
    await sqlite.app.stop()
    code, _out, err = await database_copy(sqlite.config, postgres_database)
    assert code == 0, err

    worker = await on_postgres(harness_factory, postgres_database)
    file = MemoryFile(owner_file.parent, "MEMORY.md")
    [entry] = await worker.app.memory.entries(file)
    assert "Forgotten" in await owner_says(worker, f"/admin forget {entry.id}")
    await worker.app.stop()

    restarted = await on_postgres(harness_factory, postgres_database)
    assert secret not in await owner_says(restarted, "/admin memory")
    assert await restarted.app.memory.entries(file) == []
    assert await rows_holding(postgres_database, secret) == []
    assert secret in owner_file.read_text()  # never read again, though still on disk


async def test_copying_again_after_a_forget_brings_nothing_back(
    postgres_server: PostgresServer, postgres_database: str, harness_factory: HarnessFactory
) -> None:
    secret = new_secret()
    sqlite = await copied_gateway_with_memories(
        harness_factory, postgres_database, f"Alice's bike lock is {secret}"
    )
    worker = await on_postgres(harness_factory, postgres_database)
    assert "1 entries" in await command(worker, "/forget all confirm")
    await worker.app.stop()

    fresh_name = await postgres_server.create_database()
    fresh = postgres_server.url(fresh_name)
    try:
        for target in (fresh, postgres_database):
            code, out, err = await database_copy(sqlite.config, target)
            assert await rows_holding(target, secret) == []
            assert code == 2, out
            assert "was copied into" in err
    finally:
        await postgres_server.drop_database(fresh_name)

    restarted = await on_postgres(harness_factory, postgres_database)
    assert secret not in await command(restarted, "/memory")


async def test_forget_all_on_sqlite_rows_stays_forgotten_after_a_restart(
    harness_factory: HarnessFactory,
) -> None:
    secret = new_secret()
    files = await harness_factory()
    await memorize(files, f"Alice's locker code is {secret}")
    await files.app.stop()
    rows = await harness_factory(storage={"documents": "database"})  # reads the files once
    assert "1 entries" in await command(rows, "/forget all confirm")
    await rows.app.stop()

    restarted = await harness_factory(storage={"documents": "database"})
    assert secret not in await command(restarted, "/memory")
    user_file = MemoryFile(restarted.app.catalog.require("example").dir, USER_FILE)
    assert secret not in (await restarted.app.memory.stored(user_file)).data.decode()


async def restored_after_forgetting(harness_factory: HarnessFactory, secret: str) -> Harness:
    """A SQLite gateway (files) where the user forgot the entry holding ``secret`` and the
    owner then put back their per-user file from a backup taken before; stopped."""
    files = await harness_factory()
    entry_id = await memorize(files, f"Alice's locker code is {secret}")
    await memorize(files, "Alice has a cat")
    user_file = files.config.data_dir / "partners" / "example" / USER_FILE
    before = user_file.read_bytes()
    assert "Forgotten" in await command(files, f"/forget {entry_id}")
    user_file.write_bytes(before)
    await files.app.stop()
    return files


async def test_a_copy_leaves_out_entries_forgotten_before_it(
    postgres_database: str, harness_factory: HarnessFactory
) -> None:
    secret = new_secret()
    files = await restored_after_forgetting(harness_factory, secret)
    code, _out, err = await database_copy(files.config, postgres_database)
    assert code == 0, err
    assert await rows_holding(postgres_database, secret) == []
    assert f"partners/example/{USER_FILE}" in await rows_holding(
        postgres_database, "Alice has a cat"
    )


async def test_files_read_into_rows_at_start_leave_out_forgotten_entries(
    harness_factory: HarnessFactory,
) -> None:
    secret = new_secret()
    await restored_after_forgetting(harness_factory, secret)
    rows = await harness_factory(storage={"documents": "database"})
    shown = await command(rows, "/memory")
    assert secret not in shown and "Alice has a cat" in shown


async def owner_review(harness: Harness, text: str) -> ReviewResult:
    """The owner talks with the partner; its review adds ``text`` to the partner's own memory."""
    chat = f"test:{OWNER_ID}"
    await harness.app.store.upsert_chat(chat, "test", str(OWNER_ID), None, "dm", None)
    await harness.app.store.select_partner(chat, "example")
    harness.llm.script(Reply(text="what a day"))
    await harness.send(dm(OWNER_ID, "we spent the whole day sailing", name="Owner"))
    await harness.settle()
    session = await harness.app.store.open_session(chat, "example")
    assert session is not None
    edit = {"file": "MEMORY.md", "op": "add", "text": text}
    harness.llm.script(Reply(text=json.dumps({"journal": None, "memory": [edit]})))
    return await harness.app.reviewer.review(session.id)


async def test_a_review_does_not_write_back_what_the_owner_forgot(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory
) -> None:
    harness = await harness_factory(memory={"auto_memory": True}, storage=storage_on_each_backend)
    secret = new_secret()
    fact = f"The owner's boat is called {secret}"
    await owner_review(harness, fact)
    memory_file = MemoryFile(harness.app.catalog.require("example").dir, "MEMORY.md")
    [entry] = [e for e in await harness.app.memory.entries(memory_file) if secret in e.text]
    assert "Forgotten" in await owner_says(harness, f"/admin forget example {entry.id}")

    result = await owner_review(harness, fact)
    assert secret not in await harness.app.memory.read(memory_file)
    assert any("asked to forget" in skipped for skipped in result.skipped)
