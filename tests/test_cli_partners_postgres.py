"""``companion partners new|edit|import|export`` and ``companion lore import`` on PostgreSQL
(a real subprocess beside a running worker): they write the database every worker reads, never
a data directory, and the worker serves what they wrote within a heartbeat."""

from __future__ import annotations

import json
from pathlib import Path

from partners.lore_books import LoreLibrary
from tests import card_fixtures as cards
from tests.test_cli import companion
from tests.test_cli_memory import editor
from tests.test_partners_postgres import Workers, until, workers

__all__ = ["workers"]  # the fixture, imported so that this module's tests use it


def write_config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-test"\nmodel = "m"\n'
        f'[storage]\ndata_dir = "{tmp_path / "cli"}"\ndatabase_url = "{url}"\n',
        encoding="utf-8",
    )
    return path


async def test_a_partner_made_from_the_terminal_is_served_by_a_running_worker(
    workers: Workers, tmp_path: Path
) -> None:
    worker = await workers.start("a")
    config = write_config(tmp_path, workers.url)
    code, out, err = await companion(config, "partners", "new", "luna", "--name", "Luna")
    assert code == 0, err
    assert "in the database" in out
    await until(lambda: worker.app.catalog.get("luna") is not None, "the worker to know luna")
    assert not (tmp_path / "cli" / "partners").exists()
    code, out, err = await companion(config, "partners", "list")
    assert code == 0, err
    assert "luna\tLuna\tper_user" in out


async def test_preset_edited_from_the_terminal_reaches_a_running_worker(
    workers: Workers, tmp_path: Path
) -> None:
    worker = await workers.start("a")
    config = write_config(tmp_path, workers.url)
    rename = (
        "text = open(file).read().replace('name: Mira', 'name: Stella')\n"
        "open(file, 'w').write(text)"
    )
    code, _, err = await companion(
        config, "partners", "edit", "example", "preset.yml", extra_env=editor(tmp_path, rename)
    )
    assert code == 0, err
    await until(lambda: worker.app.catalog.require("example").name == "Stella", "the new name")
    broken = "open(file, 'a').write('memory_scope: everyone\\n')"
    code, _, err = await companion(
        config, "partners", "edit", "example", "preset.yml", extra_env=editor(tmp_path, broken)
    )
    assert code == 2 and "memory_scope" in err and "not saved" in err
    assert worker.app.catalog.require("example").preset.memory_scope == "per_user"


async def test_a_card_and_a_lorebook_imported_from_the_terminal_reach_a_running_worker(
    workers: Workers, tmp_path: Path
) -> None:
    worker = await workers.start("a")
    config = write_config(tmp_path, workers.url)
    card = tmp_path / "sirin.png"
    card.write_bytes(cards.png(cards.v2()))
    code, _, err = await companion(
        config, "partners", "import", str(card), "--id", "sirin", "--yes"
    )
    assert code == 0, err
    book = tmp_path / "book.json"
    book.write_text(json.dumps(cards.book(3)), encoding="utf-8")
    code, out, err = await companion(config, "lore", "import", str(book), "sirin")
    assert code == 0, err
    assert "added 3 entries of 'Harbour lore' to sirin's lorebook.json (now 3)" in out

    def lore_entries() -> int:
        partner = worker.app.catalog.get("sirin")
        found = LoreLibrary().book(partner) if partner else None
        return len(found.entries) if found else 0

    await until(lambda: lore_entries() == 3, "the worker to have sirin's lorebook")
    out_card = tmp_path / "out.json"
    code, _, err = await companion(config, "partners", "export", "sirin", "--card", str(out_card))
    assert code == 0, err
    exported = json.loads(out_card.read_text(encoding="utf-8"))["data"]
    assert (
        exported["description"] == "{{char}} is a lighthouse painter who talks to {{user}} kindly."
    )
    assert len(exported["character_book"]["entries"]) == 3
