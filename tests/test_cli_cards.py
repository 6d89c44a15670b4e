"""`companion partners import|export` and `companion lore import`, run in-process."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.cli.main import main
from tests import card_fixtures as cards


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    return path


def run(config: Path, *args: str, stdin: str = "") -> int:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(stdin))
        return main(["--config", str(config), *args])


def test_import_shows_the_summary_and_writes_only_when_confirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    card = tmp_path / "sirin.png"
    card.write_bytes(cards.png(cards.v3(), keyword="ccv3"))
    assert run(config, "partners", "import", str(card), stdin="n\n") == 1
    shown = capsys.readouterr()
    assert "lorebook entries: 2" in shown.out and "Create partner 'sirin'?" in shown.err
    assert not (tmp_path / "data" / "partners" / "sirin").exists()
    assert "private: only you can pick it until /admin partner set sirin public true" in shown.out
    assert run(config, "partners", "import", str(card), stdin="y\n") == 0
    assert (tmp_path / "data" / "partners" / "sirin" / "lorebook.json").exists()
    assert "public: false" in (tmp_path / "data/partners/sirin/preset.yml").read_text("utf-8")


def test_a_bad_card_is_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    card = tmp_path / "broken.png"
    card.write_bytes(cards.png(cards.v2())[:-30])
    assert run(config, "partners", "import", str(card), "--yes") == 2
    err = capsys.readouterr().err
    assert err.strip() == "companion: broken.png: truncated PNG (chunk b'IDAT' runs past the end)"


def test_export_writes_a_card_that_imports_as_the_same_partner(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    card = tmp_path / "in.json"
    card.write_bytes(cards.as_json(cards.v2()))
    assert run(config, "partners", "import", str(card), "--id", "one", "--yes") == 0
    out = tmp_path / "out.json"
    assert run(config, "partners", "export", "one", "--card", str(out)) == 0
    assert json.loads(out.read_text("utf-8"))["spec"] == "chara_card_v3"
    assert run(config, "partners", "import", str(out), "--id", "two", "--yes") == 0
    partners = tmp_path / "data" / "partners"
    for name in ("IDENTITY.md", "SOUL.md", "card.json", "preset.yml"):
        assert (partners / "one" / name).read_bytes() == (partners / "two" / name).read_bytes()


def test_lore_import_adds_world_info_entries_to_a_partner(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    card = tmp_path / "in.json"
    card.write_bytes(cards.as_json(cards.v3()))
    assert run(config, "partners", "import", str(card), "--id", "one", "--yes") == 0
    world = tmp_path / "world.json"
    entries = {"0": {"uid": 0, "key": ["harbour"], "content": "Boats.", "order": 3}}
    world.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    assert run(config, "lore", "import", str(world), "one") == 0
    book = json.loads((tmp_path / "data" / "partners" / "one" / "lorebook.json").read_text())
    assert [e["content"] for e in book["entries"]][-1] == "Boats."
    assert len(book["entries"]) == 3


def test_lore_import_leaves_out_a_bad_entry_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    card = tmp_path / "in.json"
    card.write_bytes(cards.as_json(cards.v2()))
    assert run(config, "partners", "import", str(card), "--id", "one", "--yes") == 0
    world = tmp_path / "world.json"
    entries = {
        "0": {"uid": 0, "key": "harbour", "content": "Boats."},
        "1": {"uid": 1, "key": 5, "comment": "Gate", "content": "The gate."},
    }
    world.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    capsys.readouterr()
    assert run(config, "lore", "import", str(world), "one") == 0
    shown = capsys.readouterr()
    assert shown.err == (
        "note: world.json: entry 2 (uid 1, 'Gate'): 'key' should be a list of texts, "
        "not a number; left out\n"
    )
    assert "added 1 entries" in shown.out
    book = json.loads((tmp_path / "data" / "partners" / "one" / "lorebook.json").read_text())
    assert [(e["keys"], e["content"]) for e in book["entries"]] == [(["harbour"], "Boats.")]


def with_partner(tmp_path: Path, config: Path) -> str:
    card = tmp_path / "in.json"
    card.write_bytes(cards.as_json(cards.v2()))
    assert run(config, "partners", "import", str(card), "--id", "one", "--yes") == 0
    return "one"


def test_a_deeply_nested_card_is_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    deep = tmp_path / "deep.json"
    deep.write_bytes(cards.deep_card(100_000))
    assert run(config, "partners", "import", str(deep), "--yes") == 2
    err = capsys.readouterr().err
    assert err.startswith("companion: deep.json: JSON nested deeper than 64 levels")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "text",
    [
        '{"entries": {"0": {"key": ["a"]}}, "name": ' + "[" * 5_000 + "]" * 5_000 + "}",
        '{"entries": {"0": {"key": ["a"]}}, "name": ' + "[" * 100 + "]" * 100 + "}",
        '{"entries": {"0": {"key": ["a"], "order": "soon"}, "1": [], "2": 5',
        '["not", "a", "lorebook"]',
    ],
)
def test_a_bad_world_info_file_is_one_line_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    config = write_config(tmp_path)
    partner = with_partner(tmp_path, config)
    world = tmp_path / "world.json"
    world.write_text(text, encoding="utf-8")
    capsys.readouterr()
    assert run(config, "lore", "import", str(world), partner) == 2
    err = capsys.readouterr().err
    assert err.startswith("companion: world.json: ") and err.count("\n") == 1


def test_lore_import_refuses_to_grow_a_book_past_what_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    partner = with_partner(tmp_path, config)
    stored = tmp_path / "data" / "partners" / partner / "lorebook.json"
    text = "tide " * 2_000
    book = {"entries": [{"keys": [f"k{i}"], "content": text} for i in range(1_200)]}
    stored.write_text(json.dumps(book), encoding="utf-8")
    before = stored.read_bytes()
    world = tmp_path / "world.json"
    entries = {str(i): {"uid": i, "key": [f"w{i}"], "content": text} for i in range(1_200)}
    world.write_text(json.dumps({"entries": entries}), encoding="utf-8")
    capsys.readouterr()
    assert run(config, "lore", "import", str(world), partner) == 2
    assert "over the limit" in capsys.readouterr().err
    assert stored.read_bytes() == before


def test_a_partner_id_with_a_trailing_newline_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    card = tmp_path / "in.json"
    card.write_bytes(cards.as_json(cards.v2()))
    assert run(config, "partners", "import", str(card), "--id", "sirin\n", "--yes") == 2
    assert "'sirin\\n' is not a valid partner id" in capsys.readouterr().err
    assert not (tmp_path / "data" / "partners").exists()
