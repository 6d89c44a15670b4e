"""The memory store: ids, duplicates, limits, hand edits, CRLF, changelog, concurrency — on
every document backend (files, rows in SQLite, rows in PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from partners.changelog import CHANGELOG
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import MemoryInputError
from partners.memory_format import MAX_ENTRY_CHARS, strip_ids
from partners.memory_undo import undo
from tests.document_backends import MemoryBackend, memory_backend

__all__ = ["memory_backend"]  # the fixture, imported so that this module's tests use it


@pytest.fixture
def file(tmp_path: Path) -> MemoryFile:
    return MemoryFile(tmp_path / "partner", "MEMORY.md")


@pytest.fixture
def backend(memory_backend: MemoryBackend) -> MemoryBackend:
    return memory_backend


def text_of(data: bytes) -> str:
    return data.decode("utf-8")


async def test_add_returns_an_id_written_into_the_file(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    result = await store.add(file, "Likes green tea", reason="said so", source="test")
    assert result.entry_id and result.entry_id.startswith("m_")
    assert f"- Likes green tea <!-- {result.entry_id} -->" in text_of(await backend.raw(file))
    entries = await store.entries(file)
    assert [(e.id, e.text) for e in entries] == [(result.entry_id, "Likes green tea")]


async def test_duplicate_add_answers_already_saved_with_the_entry(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    first = await store.add(file, "Has a cat named Miso", reason="", source="t")
    again = await store.add(file, "  has a CAT named   miso ", reason="", source="t")
    assert again.duplicate and again.entry_id == first.entry_id
    assert text_of(await backend.raw(file)).count("Miso") == 1


async def test_text_over_the_limit_is_refused_and_nothing_written(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    with pytest.raises(MemoryInputError, match=str(MAX_ENTRY_CHARS)):
        await store.add(file, "x" * (MAX_ENTRY_CHARS + 1), reason="", source="t")
    assert await backend.raw(file) == b""


async def test_edit_changes_only_that_entry(file: MemoryFile, backend: MemoryBackend) -> None:
    store = backend.store()
    a = await store.add(file, "Lives in Lisbon", reason="", source="t")
    b = await store.add(file, "Works as a nurse", reason="", source="t")
    assert a.entry_id and b.entry_id
    await store.edit(file, a.entry_id, "Lives in Porto", reason="moved", source="t")
    texts = {e.id: e.text for e in await store.entries(file)}
    assert texts == {a.entry_id: "Lives in Porto", b.entry_id: "Works as a nurse"}


async def test_edit_of_unknown_id_says_to_read_first(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    await store.add(file, "Something", reason="", source="t")
    with pytest.raises(MemoryInputError, match="read the memory"):
        await store.edit(file, "m_nothere0000", "x", reason="", source="t")


async def test_hand_edits_are_kept_and_hand_lines_get_no_id(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    await store.add(file, "First fact", reason="", source="t")
    hand = (
        text_of(await backend.raw(file)) + "\n## Written by hand\n- Prefers mornings\nSome prose.\n"
    )
    await backend.put(file, hand.encode())
    await store.add(file, "Second fact", reason="", source="t")
    text = text_of(await backend.raw(file))
    assert "## Written by hand\n- Prefers mornings\nSome prose.\n" in text
    assert "Prefers mornings <!--" not in text
    entries = await store.entries(file)
    assert [e.text for e in entries] == ["First fact", "Prefers mornings", "Second fact"]
    assert entries[1].id is None


async def test_crlf_file_stays_crlf_and_bom_is_kept(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    await backend.put(file, "\ufeff# Memory\r\n- Old line\r\n".encode())
    store = backend.store()
    await store.add(file, "New line", reason="", source="t")
    raw = await backend.raw(file)
    assert raw.startswith("\ufeff".encode())
    assert b"\r\n- New line <!-- m_" in raw
    assert raw.count(b"\n") == raw.count(b"\r\n") == 3


async def test_invalid_utf8_file_is_never_overwritten(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    original = b"- caf\xe9 latte\n"
    await backend.put(file, original)
    store = backend.store()
    with pytest.raises(MemoryInputError, match="UTF-8"):
        await store.add(file, "Another", reason="", source="t")
    assert await backend.raw(file) == original


async def test_changelog_record_is_written_for_every_change(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    added = await store.add(file, "Birthday on 3 May", reason="told me", source="chat")
    assert added.entry_id
    await store.edit(file, added.entry_id, "Birthday on 4 May", reason="fix", source="chat")
    await store.remove(file, added.entry_id, reason="asked", source="chat")
    lines = text_of(await backend.raw(MemoryFile(file.root, CHANGELOG))).splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["op"] for r in records] == ["add", "edit", "remove"]
    assert records[1]["old"] == "Birthday on 3 May" and records[1]["new"] == "Birthday on 4 May"
    assert all(r["file"] == "MEMORY.md" for r in records)


async def test_undo_reverses_an_edit_and_a_remove(file: MemoryFile, backend: MemoryBackend) -> None:
    store = backend.store()
    added = await store.add(file, "Drinks coffee", reason="", source="t")
    assert added.entry_id
    edited = await store.edit(file, added.entry_id, "Drinks tea", reason="", source="t")
    assert edited.change_id
    await undo(store, file.root, edited.change_id, source="owner")
    assert [e.text for e in await store.entries(file)] == ["Drinks coffee"]
    removed = await store.remove(file, added.entry_id, reason="", source="t")
    assert removed.change_id
    await undo(store, file.root, removed.change_id, source="owner")
    entries = await store.entries(file)
    assert [(e.id, e.text) for e in entries] == [(added.entry_id, "Drinks coffee")]


async def test_two_hundred_concurrent_adds_lose_nothing(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    results = await asyncio.gather(
        *(store.add(file, f"fact number {i}", reason="", source="t") for i in range(200))
    )
    assert len({r.entry_id for r in results}) == 200
    texts = {e.text for e in await store.entries(file)}
    assert texts == {f"fact number {i}" for i in range(200)}


async def test_changelog_is_trimmed_to_the_configured_size(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store(changelog_keep=10)
    for i in range(30):
        await store.add(file, f"fact {i}", reason="", source="t")
    records = text_of(await backend.raw(MemoryFile(file.root, CHANGELOG))).splitlines()
    assert 10 <= len(records) <= 11
    assert json.loads(records[-1])["new"] == "fact 29"


def test_ids_are_stripped_for_prompts() -> None:
    assert strip_ids("- likes tea <!-- m_18c2f0a1b2c3d -->\n") == "- likes tea\n"


async def test_entry_text_cannot_smuggle_an_id_comment(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    result = await store.add(file, "sneaky <!-- m_fake --> text", reason="", source="t")
    entries = await store.entries(file)
    assert [(e.id, e.text) for e in entries] == [(result.entry_id, "sneaky m_fake text")]


def edit_by_hand_in_the_same_tick(path: Path, old: str, new: str) -> None:
    """A hand edit in place that keeps the file's size, inode and modification time, as an
    editor writing twice within one tick of the file system's clock does."""
    assert len(old.encode()) == len(new.encode())
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(old.encode(), new.encode()))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (
        before.st_size,
        before.st_ino,
        before.st_mtime_ns,
    )


async def test_a_hand_edit_between_two_reads_is_read_at_once(file: MemoryFile) -> None:
    store = MemoryStore()
    await store.add(file, "Lives in Lisbon", reason="", source="t")
    assert [e.text for e in await store.entries(file)] == ["Lives in Lisbon"]
    edit_by_hand_in_the_same_tick(file.path, "Lisbon", "Dublin")
    assert [e.text for e in await store.entries(file)] == ["Lives in Dublin"]


async def test_entries_a_caller_changes_do_not_change_the_next_read(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    store = backend.store()
    await store.add(file, "Likes rain", reason="", source="t")
    for _ in range(2):  # the first read parses, the second is served from what it kept
        (await store.entries(file)).clear()
    assert [e.text for e in await store.entries(file)] == ["Likes rain"]


async def test_a_file_read_for_display_still_refuses_a_rewrite(
    file: MemoryFile, backend: MemoryBackend
) -> None:
    await backend.put(file, b"- caf\xe9 latte\n")
    store = backend.store()
    assert [e.text for e in await store.entries(file)] == ["caf\ufffd latte"]
    with pytest.raises(MemoryInputError, match="UTF-8"):
        await store.entries(file, strict=True)
