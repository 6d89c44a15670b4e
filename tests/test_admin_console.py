"""The owner's file round trip in the console: the file lands in data/exports and the edited
copy is put back from a local path (only the console may name one)."""

from __future__ import annotations

from pathlib import Path

from partners.memory_format import fingerprint
from partners.partner_template import template_dir
from tests.fakes.fake_llm import FakeLLM
from tests.test_cli import companion, write_config


async def test_console_owner_edits_a_partner_file_through_a_local_path(tmp_path: Path) -> None:
    original = (template_dir() / "SOUL.md").read_bytes()
    edited = tmp_path / "soul.md"
    edited.write_text("You are a lighthouse keeper.\n", encoding="utf-8")
    stdin = (
        "/admin partner edit example SOUL.md\n"
        f"/admin partner put example SOUL.md {fingerprint(original)} {edited}\n"
    )
    async with FakeLLM() as llm:
        config = write_config(tmp_path, llm.base_url)
        code, out, err = await companion(config, "chat", stdin=stdin)
    assert code == 0, err
    exported = tmp_path / "data" / "exports" / "example-SOUL.md"
    assert exported.read_bytes() == original
    assert f"/admin partner put example SOUL.md {fingerprint(original)}" in out
    # the console takes no documents: it says to add the path, as the put below does
    assert "followed by the path of your copy" in out and "as a document" not in out
    assert "Saved SOUL.md of Mira" in out
    soul = tmp_path / "data" / "partners" / "example" / "SOUL.md"
    assert soul.read_text(encoding="utf-8") == "You are a lighthouse keeper.\n"
    assert llm.requests == []


async def put_stale_copy(tmp_path: Path, copy: Path) -> str:
    """The owner puts back ``copy`` (edited) with the fingerprint of a version SOUL.md no
    longer has — a review wrote to it meanwhile; returns what the console printed."""
    stale = fingerprint(b"the version the owner started from\n")
    async with FakeLLM() as llm:
        config = write_config(tmp_path, llm.base_url)
        code, out, err = await companion(
            config, "chat", stdin=f"/admin partner put example SOUL.md {stale} {copy}\n"
        )
    assert code == 0, err
    assert llm.requests == []
    return out


async def test_a_conflict_keeps_the_owners_edit_and_writes_the_current_version_beside_it(
    tmp_path: Path,
) -> None:
    exports = tmp_path / "data" / "exports"
    exports.mkdir(parents=True)
    edited = exports / "example-SOUL.md"  # exported by an earlier edit, then edited in place
    edited.write_text("You are a lighthouse keeper.\n", encoding="utf-8")
    out = await put_stale_copy(tmp_path, edited)
    original = (template_dir() / "SOUL.md").read_bytes()
    assert "Not saved" in out
    assert edited.read_text(encoding="utf-8") == "You are a lighthouse keeper.\n"
    current = exports / "example-SOUL.current.md"
    assert current.read_bytes() == original
    assert str(edited) in out and str(current) in out
    assert f"/admin partner put example SOUL.md {fingerprint(original)}" in out
    assert "followed by the path of your copy" in out and "as a document" not in out
    soul = tmp_path / "data" / "partners" / "example" / "SOUL.md"
    assert soul.read_bytes() == original


async def test_a_second_conflict_never_overwrites_the_copy_being_edited(tmp_path: Path) -> None:
    exports = tmp_path / "data" / "exports"
    exports.mkdir(parents=True)
    edited = exports / "example-SOUL.current.md"  # the current version of a first conflict
    edited.write_text("You are a lighthouse keeper, and you love storms.\n", encoding="utf-8")
    out = await put_stale_copy(tmp_path, edited)
    assert edited.read_text(encoding="utf-8") == (
        "You are a lighthouse keeper, and you love storms.\n"
    )
    current = exports / "example-SOUL.current-2.md"
    assert current.read_bytes() == (template_dir() / "SOUL.md").read_bytes()
    assert str(current) in out
