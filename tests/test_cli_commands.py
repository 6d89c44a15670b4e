"""The `companion` command's own surface, run in-process: --version, help that explains every
argument, and the partner commands that ask before they act."""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import PROBLEMS, build_parser, handler, main


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[storage]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    return path


def run(config: Path, *args: str, stdin: str = "") -> int:
    """``companion --config CONFIG ARGS`` with ``stdin`` as what the person types."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(stdin))
        return main(["--config", str(config), *args])


def parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser, named by its command line."""
    found = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(parsers(sub))
    return found


def test_version_names_the_program_and_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert re.fullmatch(r"companion \d+\.\d+\.\d+\S*\n", capsys.readouterr().out)


LOADED_BY_HELP = """
import sys
from bot.cli.main import main
try:
    main(["--help"])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)), file=sys.stderr)  # stdout has the help
"""


def test_help_loads_no_subcommand_module_backend_or_client() -> None:
    """`companion --help` stays quick: the subcommands' modules load when one runs."""
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED_BY_HELP], capture_output=True, text=True, check=True
    ).stderr.split()
    heavy = ("bot.", "partners", "adapters", "openai", "telegram", "discord", "pydantic")
    assert [name for name in loaded if name.startswith(heavy) and name != "bot.cli.main"] == [
        "bot.cli"
    ]


def test_every_subcommand_names_a_function_that_exists() -> None:
    named = {parser.get_default("handler") for _, parser in parsers(build_parser())} - {None}
    assert len(named) == 24
    assert all(callable(handler(name)) for name in named)


@pytest.mark.parametrize(("module", "name"), PROBLEMS)
def test_each_owner_fixable_error_is_found_where_it_is_named(module: str, name: str) -> None:
    assert issubclass(getattr(importlib.import_module(module), name), Exception)


def test_every_argument_of_every_command_is_explained() -> None:
    unexplained = [
        f"{prog}: {action.dest}"
        for prog, parser in parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction | argparse._VersionAction)
        and not (action.help or "").strip()
    ]
    assert unexplained == []


def test_import_help_shows_the_fields_and_an_example_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    text = capsys.readouterr().out
    for field in ("session", "user", "role", "text", "time", "title", "id"):
        assert f"{field}:" in text or f"{field} " in text, field
    example = next(line.strip() for line in text.splitlines() if line.strip().startswith("{"))
    record = json.loads(example)
    assert {"session", "user", "role", "text", "time"} <= record.keys()


def test_partners_delete_asks_first_and_keeps_the_partner_on_no(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert run(config, "partners", "new", "sol", "--name", "Sol") == 0
    assert run(config, "partners", "delete", "sol", stdin="n\n") == 1
    assert (tmp_path / "data" / "partners" / "sol" / "preset.yml").exists()
    assert run(config, "partners", "delete", "sol", stdin="yes\n") == 0
    assert not (tmp_path / "data" / "partners" / "sol").exists()


def test_partners_delete_without_an_answer_needs_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    run(config, "partners", "new", "sol", "--name", "Sol")
    assert run(config, "partners", "delete", "sol", stdin="") == 2
    assert "--yes" in capsys.readouterr().err
    assert (tmp_path / "data" / "partners" / "sol").exists()
    assert run(config, "partners", "delete", "sol", "--yes") == 0
    assert not (tmp_path / "data" / "partners" / "sol").exists()


def test_partners_new_asks_for_a_name_and_uses_it_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    assert run(config, "partners", "new", "sol", stdin="Sol\n") == 0
    assert "private: only you can pick it until /admin partner set sol public true" in (
        capsys.readouterr().out
    )
    directory = tmp_path / "data" / "partners" / "sol"
    preset = (directory / "preset.yml").read_text(encoding="utf-8")
    assert "name: Sol\n" in preset
    every_file = "".join(p.read_text(encoding="utf-8") for p in directory.glob("*.*"))
    assert "Mira" not in every_file


def test_partners_new_without_a_name_to_read_says_how_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    assert run(config, "partners", "new", "sol", stdin="") == 2
    assert "--name" in capsys.readouterr().err
    assert not (tmp_path / "data" / "partners" / "sol").exists()
