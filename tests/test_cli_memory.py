"""``companion memory export|edit`` as the owner runs them (a real subprocess), on memory
documents kept as rows in the database: the owner still works with Markdown files."""

from __future__ import annotations

import sqlite3
import stat
import sys
from pathlib import Path

from bot.config.model import load_config
from bot.gateway.memory_documents import memory_store
from bot.store.opening import open_store
from partners.memory import MemoryFile
from tests.test_cli import companion

ROWS = '[storage]\ndocuments = "database"\n'


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-test"\nmodel = "m"\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\ndocuments = "database"\n',
        encoding="utf-8",
    )
    return path


async def remember(config: Path, *texts: str) -> MemoryFile:
    """Write entries into luna's MEMORY.md through the gateway's own memory store."""
    settings = load_config(config)
    store = await open_store(settings.data_dir / "gateway.db")
    try:
        memory = memory_store(settings, store)
        file = MemoryFile(settings.data_dir / "partners" / "luna", "MEMORY.md")
        for text in texts:
            await memory.add(file, text, reason="", source="test")
        return file
    finally:
        await store.close()


def editor(tmp_path: Path, script: str) -> dict[str, str]:
    """An $EDITOR that runs ``script`` (Python) on the file it is given."""
    path = tmp_path / "editor.py"
    path.write_text(f"#!{sys.executable}\nimport sys\nfile = sys.argv[1]\n{script}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return {"EDITOR": str(path), "VISUAL": ""}


def stored(config: Path, name: str) -> bytes:
    database = load_config(config).data_dir / "gateway.db"
    with sqlite3.connect(database) as db:
        row = db.execute(
            "SELECT content FROM documents WHERE namespace = 'partners/luna' AND path = ?",
            (name,),
        ).fetchone()
    return bytes(row[0])


async def test_export_writes_the_rows_as_markdown_files(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    await remember(config, "Likes green tea", "Has a cat named Miso")
    code, out, err = await companion(config, "memory", "export", "luna", str(tmp_path / "out"))
    assert code == 0, err
    exported = (tmp_path / "out" / "MEMORY.md").read_text(encoding="utf-8")
    assert "- Likes green tea <!-- m_" in exported and "Has a cat named Miso" in exported
    assert (tmp_path / "out" / "changelog" / "changes.jsonl").exists()
    assert not (tmp_path / "data" / "partners" / "luna" / "MEMORY.md").exists()


async def test_edit_saves_the_owners_text_back_into_the_row(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    await remember(config, "Likes green tea")
    append = "open(file, 'a').write('- Prefers mornings\\n')"
    code, out, err = await companion(
        config, "memory", "edit", "luna", "MEMORY.md", extra_env=editor(tmp_path, append)
    )
    assert code == 0, err
    text = stored(config, "MEMORY.md").decode()
    assert "Likes green tea" in text and text.endswith("- Prefers mornings\n")


async def test_edit_onto_a_version_written_meanwhile_keeps_both_texts(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    await remember(config, "Likes green tea")
    database = load_config(config).data_dir / "gateway.db"
    # while the owner edits, a review writes the same document
    meanwhile = (
        "import sqlite3\n"
        f"db = sqlite3.connect({str(database)!r})\n"
        "db.execute(\"UPDATE documents SET content = CAST(content || '- From a review\\n'"
        " AS BLOB), version = version + 1 WHERE path = 'MEMORY.md'\")\n"
        "db.commit()\n"
        "open(file, 'a').write('- Mine\\n')"
    )
    code, out, err = await companion(
        config, "memory", "edit", "luna", "MEMORY.md", extra_env=editor(tmp_path, meanwhile)
    )
    assert code == 2, err
    assert "changed while you edited it" in err and "nothing was overwritten" in err
    saved = stored(config, "MEMORY.md").decode()
    assert "From a review" in saved and "Mine" not in saved
    kept = err.split("Your text is in ")[1].split(":")[0]
    assert (tmp_path / kept).read_text(encoding="utf-8").endswith("- Mine\n")


async def test_show_and_export_read_the_rows_of_a_postgresql_database(
    tmp_path: Path, postgres_database: str
) -> None:
    """On PostgreSQL the documents are in the database the config names, not in a SQLite
    file in the data directory (which a worker does not have)."""
    config = tmp_path / "config.toml"
    config.write_text(
        f'[llm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key = "sk-test"\nmodel = "m"\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\ndatabase_url = "{postgres_database}"\n',
        encoding="utf-8",
    )
    settings = load_config(config)
    store = await open_store(settings.database)
    try:
        file = MemoryFile(settings.data_dir / "partners" / "luna", "MEMORY.md")
        await memory_store(settings, store).add(file, "Likes green tea", reason="", source="t")
    finally:
        await store.close()
    code, shown, err = await companion(config, "memory", "show", "luna")
    assert code == 0, err
    code, _, err = await companion(config, "memory", "export", "luna", str(tmp_path / "out"))
    assert code == 0, err
    assert "Likes green tea" in shown
    assert "Likes green tea" in (tmp_path / "out" / "MEMORY.md").read_text(encoding="utf-8")
    assert not (tmp_path / "data" / "gateway.db").exists()
