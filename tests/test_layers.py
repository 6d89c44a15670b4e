"""The layers of docs/architecture.md ("Layers"), checked on every import of bot/, partners/ and
adapters/: a module imports only from its own layer or below; the store is the only one to speak
SQL, the channels the only ones to speak a chat SDK, and channels reach the gateway only through
the command table, a leaf. Imports inside functions count too, and no module of ours reaches itself
through its imports (no import circle). What a channel loads is checked for real too: a fresh
interpreter imports it, and no partner or PostgreSQL module may come along.

A small AST walk rather than import-linter: the layers cut across packages (bot/ holds both
Foundation and Gateway modules), so import-linter's contracts would have to name every gateway
module and a new one would go unchecked; here any bot module not named Foundation is Gateway.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "adapters", "partners")

FOUNDATION, PARTNERS, GATEWAY, CHANNELS = 1, 2, 3, 4
LAYER_NAMES = {
    FOUNDATION: "Foundation",
    PARTNERS: "Partners",
    GATEWAY: "Gateway",
    CHANNELS: "Channels",
}
FOUNDATION_MODULES = (
    "bot.config",
    "bot.events",
    "bot.services",
    "bot.store",
    "bot.text",
    "adapters.base",
)
"""Foundation: settings (``bot/config/``), boundary types, the outside services' clients
(``bot/services/``: the LLM, speech and embeddings endpoints, the vector arithmetic beside
them, how retrying loops log their faults), the store package (every module in it), the text
every layer writes (``bot/text/``: owner-facing literals, reply markers, the UTF-16 length) and
the channel contract; ``bot`` itself (an empty package module) too."""
COMMAND_TABLE = "bot.commands.table"
"""The one gateway module the channels may import (to register the slash commands)."""
COMPOSITION_ROOT = "bot.app"
"""Builds every part and every channel and hands each what it needs (the package ``bot/app/``):
it may import any layer."""
BUILDERS = ("bot/app/build.py", "bot/app/parts.py")
"""Where the parts are built, in order: no part is patched there after it was built."""
SQL_DRIVERS = ("sqlite3", "aiosqlite", "asyncpg", "psycopg")
CHAT_SDKS = ("telegram", "discord")

KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}
"""Imports that break the layers today, each with why; the scale-out issue straightens them.
A pair that no longer occurs must leave this list (see the last test)."""

CHANNEL_MODULES = sorted(path.stem for path in (ROOT / "adapters").glob("*_channel.py"))
FORBIDDEN_IN_A_CHANNEL = ("partners", "asyncpg", "bot.store.postgres")
"""What importing a channel module must not load, however indirectly: the channels hand
events to the gateway and never need a partner or the PostgreSQL driver to do it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def our_modules() -> dict[str, Path]:
    return {
        module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }


def imports_of(module: str, path: Path) -> Iterator[str]:
    """Every module ``module`` imports, absolute, wherever in the file the import stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            prefix = ".".join(base) if node.level else ""
            name = ".".join(p for p in (prefix, node.module or "") if p)
            yield name
            # `from bot.store import rows` imports a module, `from bot import store` too
            yield from (f"{name}.{alias.name}" for alias in node.names)


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that an imported name is, or lives in (None: not ours)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def layer(module: str) -> int:
    if module == "bot" or any(
        module == f or module.startswith(f + ".") for f in FOUNDATION_MODULES
    ):
        return FOUNDATION
    return {"partners": PARTNERS, "bot": GATEWAY, "adapters": CHANNELS}[module.split(".")[0]]


def breaks_layers(importer: str, imported: str) -> bool:
    if importer == COMPOSITION_ROOT or importer.startswith(COMPOSITION_ROOT + "."):
        return False
    if layer(importer) == CHANNELS:
        if imported == "bot.store" or imported.startswith("bot.store."):
            return True  # channels hand inbound messages to the gateway, never to the store
        if imported == COMMAND_TABLE:
            return False
    return layer(imported) > layer(importer)


def import_pairs() -> set[tuple[str, str]]:
    modules = our_modules()
    pairs = set()
    for module, path in modules.items():
        for name in imports_of(module, path):
            target = resolve(name, modules)
            if target is not None and target != module:
                pairs.add((module, target))
    return pairs


def external_imports() -> set[tuple[str, str]]:
    """(our module, top-level name of a package not ours) for every import."""
    return {
        (module, name.split(".")[0])
        for module, path in our_modules().items()
        for name in imports_of(module, path)
        if name.split(".")[0] not in PACKAGES
    }


def test_every_import_follows_the_layers() -> None:
    broken = {
        f"{a} ({LAYER_NAMES[layer(a)]}) imports {b} ({LAYER_NAMES[layer(b)]})"
        for a, b in import_pairs()
        if breaks_layers(a, b) and (a, b) not in KNOWN_VIOLATIONS
    }
    assert not broken, "imports across docs/architecture.md's layers:\n" + "\n".join(sorted(broken))


def test_the_store_imports_nothing_of_ours_outside_itself() -> None:
    outside = {
        f"{a} imports {b}"
        for a, b in import_pairs()
        if a.startswith("bot.store") and not b.startswith("bot.store")
    }
    assert not outside, "\n".join(sorted(outside))


def test_only_the_store_speaks_to_the_database_driver() -> None:
    speaking = {
        a for a, name in external_imports() if name in SQL_DRIVERS and not a.startswith("bot.store")
    }
    assert not speaking, f"a database driver imported outside bot/store/: {sorted(speaking)}"


def test_only_the_channels_speak_to_a_chat_sdk() -> None:
    speaking = {a for a, name in external_imports() if name in CHAT_SDKS and layer(a) != CHANNELS}
    assert not speaking, f"telegram/discord imported outside adapters/: {sorted(speaking)}"


def test_the_command_table_is_a_leaf() -> None:
    # declarations only: the channels import it, so whatever it imports they load too
    ours = sorted(b for a, b in import_pairs() if a == COMMAND_TABLE and b != "bot")
    assert ours == [], f"{COMMAND_TABLE} imports {ours}: handlers belong in bot.commands.handlers"


def import_circles(pairs: set[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative so that a long chain cannot exhaust the recursion limit)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(pairs):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_import_circles_are_found() -> None:
    # the check itself: a circle of three, a chain into it, and a module that imports nothing
    pairs = {("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("e", "d")}
    assert import_circles(pairs) == [["a", "b", "c"]]
    assert import_circles({("a", "b"), ("b", "c")}) == []


def test_no_import_circle() -> None:
    circles = import_circles(import_pairs())
    assert not circles, "modules that import each other, directly or round about:\n" + "\n".join(
        " <-> ".join(circle) for circle in circles
    )


LOADED = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("channel", CHANNEL_MODULES)
def test_importing_a_channel_loads_no_partner_and_no_postgresql(channel: str) -> None:
    # a fresh interpreter: what this test process imported already must not hide anything
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    found = subprocess.run(
        [sys.executable, "-c", LOADED, f"adapters.{channel}"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    loaded = json.loads(found.stdout)
    assert f"adapters.{channel}" in loaded
    forbidden = [
        name
        for name in loaded
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_IN_A_CHANNEL)
    ]
    assert forbidden == [], f"importing adapters.{channel} loads {forbidden}"


def assignments_to_other_objects(source: str) -> list[str]:
    """Every ``X.attr = ...`` (or ``+=``) whose X is not ``self``: a part's attribute set
    from outside it, after it was built."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            found.extend(
                f"line {part.lineno}: {ast.unparse(part)} = ..."
                for part in ast.walk(target)
                if isinstance(part, ast.Attribute)
                and isinstance(part.ctx, ast.Store)
                and not (isinstance(part.value, ast.Name) and part.value.id == "self")
            )
    return found


def test_the_check_for_patched_parts_finds_them() -> None:
    source = "self.a = 1\nx.on_end = f\nb = 2\nx.y.z += 1\n(p, q.r) = 1, 2\n"
    assert assignments_to_other_objects(source) == [
        "line 2: x.on_end = ...",
        "line 4: x.y.z = ...",
        "line 5: q.r = ...",
    ]


@pytest.mark.parametrize("builder", BUILDERS)
def test_no_part_is_patched_after_it_is_built(builder: str) -> None:
    # every part gets what it needs in its constructor; none is wired in afterwards
    found = assignments_to_other_objects((ROOT / builder).read_text(encoding="utf-8"))
    assert found == [], f"{builder} sets another object's attribute: {found}"


def test_the_known_violations_still_occur() -> None:
    # a straightened import leaves the list, so the list never hides a new one
    pairs = import_pairs()
    assert {pair for pair in KNOWN_VIOLATIONS if pair not in pairs} == set()


def test_the_store_interface_loads_no_database_driver() -> None:
    # code written against Store (most of the gateway) must not pay for a driver it may
    # never use: a fresh interpreter shows what the import really loads, deferred ones too
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, bot.store.protocol, bot.store;"
            " print(' '.join(m for m in ('asyncpg', 'aiosqlite') if m in sys.modules))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert loaded == [], f"importing the store interface loads {loaded}"
