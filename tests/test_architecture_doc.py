"""docs/architecture.md stays true to the code: every file or folder it names exists, and
every entry at the top of bot/ is named in its map of the wings."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
NAMED_PATH = re.compile(r"`((?:bot|adapters|partners|tests)/[\w./-]*)`")


def named_paths() -> set[str]:
    return set(NAMED_PATH.findall(DOC.read_text(encoding="utf-8")))


def test_every_path_the_architecture_names_exists() -> None:
    missing = sorted(p for p in named_paths() if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_wing_of_bot_is_in_the_map() -> None:
    named = {p.rstrip("/") for p in named_paths() if p.count("/") == 1 or p.endswith("/")}
    entries = {
        f"bot/{p.name}"
        for p in (ROOT / "bot").iterdir()
        if p.name != "__init__.py"
        and not p.name.startswith((".", "__"))
        and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    unnamed = sorted(e for e in entries if e not in named)
    assert not unnamed, f"bot/ entries missing from docs/architecture.md's wings: {unnamed}"
