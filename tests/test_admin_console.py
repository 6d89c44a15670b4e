"""The owner's file round trip in the console: the file lands in data/exports and the edited
copy is put back from a local path (only the console may name one)."""

from __future__ import annotations

from pathlib import Path

from partners.catalog import template_dir
from partners.memory import fingerprint
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
    assert "Saved SOUL.md of Mira" in out
    soul = tmp_path / "data" / "partners" / "example" / "SOUL.md"
    assert soul.read_text(encoding="utf-8") == "You are a lighthouse keeper.\n"
    assert llm.requests == []
