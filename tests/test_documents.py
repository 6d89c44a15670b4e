"""Memory documents behind the seam (partners/documents.py): versions refuse stale writes on
every backend, writers on several workers take turns on PostgreSQL, and forgetting leaves no
copy of the text in the documents' rows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from bot.store import Store
from bot.store.postgres.connection import create_pool
from bot.store.postgres.documents import PostgresDocuments
from bot.store.postgres.migrations import migrate
from partners.changelog import CHANGELOG
from partners.documents import DatabaseDocuments, DocumentConflict
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import FileChanged
from partners.memory_format import fingerprint
from partners.partner_template import template_dir
from tests.admin_support import admin
from tests.conftest import HarnessFactory, dm
from tests.document_backends import MemoryBackend, memory_backend, no_recompute
from tests.fakes.fake_llm import Reply, ToolCallSpec
from tests.test_forgetting import USER, command, memorize, new_secret, review, traces

__all__ = ["memory_backend"]  # the fixture, imported so that this module's tests use it


@pytest.fixture
def file(tmp_path: Path) -> MemoryFile:
    return MemoryFile(tmp_path / "partners" / "luna", "MEMORY.md")


async def test_a_write_naming_a_stale_version_is_refused(
    file: MemoryFile, memory_backend: MemoryBackend
) -> None:
    documents = memory_backend.documents
    first = await documents.read(file.root, file.name)
    await documents.write(file.root, file.name, b"- the owner's line\n", first.version)
    with pytest.raises(DocumentConflict) as refused:
        await documents.write(file.root, file.name, b"- a stale copy\n", first.version)
    assert refused.value.current.data == b"- the owner's line\n"
    assert await memory_backend.raw(file) == b"- the owner's line\n"


async def test_an_edited_copy_of_an_old_version_keeps_the_saved_text(
    file: MemoryFile, memory_backend: MemoryBackend
) -> None:
    store = memory_backend.store()
    await store.add(file, "Likes tea", reason="", source="t")
    copy_of = fingerprint(await memory_backend.raw(file))
    await store.add(file, "Has a cat", reason="review", source="t")
    with pytest.raises(FileChanged):
        await store.replace_file(file, "- only mine\n", copy_of, reason="", source="owner")
    assert [e.text for e in await store.entries(file)] == ["Likes tea", "Has a cat"]


async def test_documents_are_listed_by_folder(
    file: MemoryFile, memory_backend: MemoryBackend
) -> None:
    store = memory_backend.store()
    for name in ("users/telegram_1.md", "users/telegram_2.md", "memory/2026-05-01.md"):
        await store.add(MemoryFile(file.root, name), "a fact", reason="", source="t")
    names = await memory_backend.documents.names(file.root, "users")
    assert names == ["users/telegram_1.md", "users/telegram_2.md"]
    assert await memory_backend.documents.delete(file.root, "users/telegram_1.md")
    assert await memory_backend.documents.names(file.root, "users") == ["users/telegram_2.md"]


async def test_a_partners_own_files_are_not_listed_among_its_documents(
    file: MemoryFile, memory_backend: MemoryBackend
) -> None:
    await memory_backend.put(file, b"- a fact\n")
    await memory_backend.put(MemoryFile(file.root, "preset.yml"), b"name: Luna\n")
    await memory_backend.put(MemoryFile(file.root, "avatar.png"), b"\x89PNG\r\n")
    assert await memory_backend.documents.names(file.root, "") == ["MEMORY.md"]


async def test_document_versions_list_the_named_files_of_every_namespace_under_a_prefix(
    store: Store,
) -> None:
    for namespace, path in (
        ("partners/luna", "preset.yml"),
        ("partners/luna", "SOUL.md"),
        ("partners/mira", "preset.yml"),
        ("partners/mira", "avatar.png"),
        ("owner", "preset.yml"),
    ):
        assert await store.save_document(namespace, path, b"\x00bytes\xff", 0) == 1
    assert await store.save_document("partners/mira", "avatar.png", b"\x89PNG", 1) == 2
    assert await store.document_versions("partners/", ("preset.yml", "avatar.png")) == [
        ("partners/luna", "preset.yml", 1),
        ("partners/mira", "avatar.png", 2),
        ("partners/mira", "preset.yml", 1),
    ]


async def test_moved_documents_keep_their_bytes_and_versions(store: Store) -> None:
    await store.save_document("partners/luna", "avatar.png", b"\x89PNG\x00", 0)
    await store.append_document("partners/luna", "changelog/changes.jsonl", b"{}\n")
    assert await store.move_documents("partners/luna", "partners/.trash/luna-1") == 2
    assert await store.document_paths("partners/luna", "") == []
    moved = await store.document("partners/.trash/luna-1", "avatar.png")
    assert moved is not None and (moved.content, moved.version) == (b"\x89PNG\x00", 1)


async def test_forgetting_leaves_no_copy_in_the_documents(
    file: MemoryFile, memory_backend: MemoryBackend
) -> None:
    store = memory_backend.store()
    added = await store.add(file, "Was born in Tromsø", reason="said so", source="chat")
    assert added.entry_id
    await store.edit(file, added.entry_id, "Was born in Tromsø, Norway", reason="", source="c")
    await store.forget_entry(file, added.entry_id, source="forget")
    await store.scrub_changelog(
        file.root, file.name, entry_ids={added.entry_id}, texts={"Was born in Tromsø"}
    )
    for name in (file.name, CHANGELOG):
        assert "Tromsø" not in (await memory_backend.raw(MemoryFile(file.root, name))).decode()
    assert [c.op for c in await store.changes(file.root)] == ["forgotten"] * 3


@pytest.fixture
async def two_workers(postgres_database: str, tmp_path: Path) -> AsyncIterator[list[MemoryStore]]:
    """Two gateways' memory stores on one PostgreSQL database, each with its own pool and its
    own (empty, different) data directory."""
    pools: list[asyncpg.Pool] = []
    for _ in range(2):
        pools.append(await create_pool(postgres_database))
    async with pools[0].acquire() as db:
        await migrate(db, no_recompute)
    yield [
        MemoryStore(documents=DatabaseDocuments(PostgresDocuments(pool), tmp_path / f"w{n}"))
        for n, pool in enumerate(pools)
    ]
    for pool in pools:
        await pool.close()


async def test_two_workers_writing_one_document_lose_no_update(
    two_workers: list[MemoryStore], tmp_path: Path
) -> None:
    files = [MemoryFile(tmp_path / f"w{n}" / "partners" / "luna", "MEMORY.md") for n in (0, 1)]
    writes = [
        two_workers[n].add(files[n], f"fact {n}-{i}", reason="", source=f"worker {n}")
        for i in range(25)
        for n in (0, 1)
    ]
    await asyncio.gather(*writes)
    for n in (0, 1):
        texts = {e.text for e in await two_workers[n].entries(files[n])}
        assert texts == {f"fact {w}-{i}" for i in range(25) for w in (0, 1)}
    assert len(await two_workers[0].changes(files[0].root)) == 50


async def test_a_gateway_keeping_rows_prompts_from_them_and_writes_memory_to_them(
    harness_factory: HarnessFactory,
) -> None:
    harness = await harness_factory(storage={"documents": "database"})
    app = harness.app
    partner = app.catalog.require("example")
    # the example was made from the template as rows, never as files
    soul = MemoryFile(partner.dir, "SOUL.md")
    stored = await app.memory.stored(soul)
    assert stored.data == await asyncio.to_thread((template_dir() / "SOUL.md").read_bytes)
    assert not await asyncio.to_thread(partner.dir.exists)
    await app.memory.documents.write(
        soul.root, soul.name, b"You speak like a lighthouse keeper.\n", stored.version
    )
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_memorize", {"op": "add", "text": "Likes tea"})]),
        Reply(text="noted"),
    )
    await harness.send(dm(42, "I like tea"))
    await harness.settle()
    assert "lighthouse keeper" in harness.llm.requests[0]["messages"][0]["content"]
    users = await app.memory.documents.names(partner.dir, "users")
    assert len(users) == 1
    assert "Likes tea" in await app.memory.read(MemoryFile(partner.dir, users[0]))
    assert not await asyncio.to_thread((partner.dir / "users").exists)


async def test_a_partner_cloned_on_rows_starts_from_the_sources_rows(
    harness_factory: HarnessFactory,
) -> None:
    harness = await harness_factory(storage={"documents": "database"})
    memory = harness.app.memory
    source = harness.app.catalog.require("example").dir
    soul = await memory.stored(MemoryFile(source, "SOUL.md"))
    await memory.documents.write(source, "SOUL.md", b"Only the rows say this.\n", soul.version)
    await memory.add(MemoryFile(source, "users/test-42.md"), "Likes tea", reason="", source="t")
    assert "Cloned example to twin" in await admin(harness, "/admin partner clone example twin")
    twin = harness.app.catalog.require("twin").dir
    assert await memory.read(MemoryFile(twin, "SOUL.md")) == "Only the rows say this.\n"
    assert await memory.documents.names(twin, "users") == []


async def test_forgetting_on_rows_leaves_no_trace_in_the_database(
    harness_factory: HarnessFactory,
) -> None:
    harness = await harness_factory(memory={"auto_memory": True}, storage={"documents": "database"})
    secret, edited = new_secret(), new_secret()
    first = await memorize(harness, f"Alice's old address is {edited}")
    await memorize(harness, f"Alice's locker code is {secret}")
    harness.llm.script(
        Reply(
            tool_calls=[
                ToolCallSpec(
                    "partner_memorize",
                    {"op": "edit", "target_id": first, "text": "Alice moved house"},
                )
            ]
        ),
        Reply(text="ok"),
    )
    await harness.send(dm(USER, "that changed, please update it"))
    await harness.settle()
    await review(harness, {"journal": {"summary": f"Alice told me about {secret}"}})
    placed = await traces(harness, secret) + await traces(harness, edited)
    assert placed and all(not t.startswith("partners/") for t in placed)  # rows, not files
    answer = await command(harness, "/forget all confirm")
    assert "2 entries and 1 diary passages" in answer
    assert await traces(harness, secret) == []
    assert await traces(harness, edited) == []


async def test_admin_memory_on_rows_lists_and_forgets_per_user_documents(
    harness_factory: HarnessFactory,
) -> None:
    harness = await harness_factory(storage={"documents": "database"})
    partner = harness.app.catalog.require("example").dir
    user_file = MemoryFile(partner, "users/test-42.md")
    added = await harness.app.memory.add(user_file, "Likes tea", reason="", source="t")
    assert "Per-user files (1): test-42" in await admin(harness, "/admin memory example")
    answer = await admin(harness, f"/admin forget example {added.entry_id}")
    assert "Forgotten" in answer
    assert await harness.app.memory.entries(user_file) == []
