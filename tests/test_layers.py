"""The layers of DESIGN.md ("Layout"), checked on every import of bot/, partners/ and adapters/:
a module imports only from its own layer or below; the store is the only one to speak SQL,
the channels the only ones to speak a chat SDK, and channels reach the gateway only through
the command table. Imports inside functions count too.

A small AST walk rather than import-linter: the layers cut across packages (bot/ holds both
Foundation and Gateway modules), so import-linter's contracts would have to name every gateway
module and a new one would go unchecked; here any bot module not named Foundation is Gateway.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

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
every layer writes (``bot/text/``: owner-facing literals, reply markers) and the channel
contract; ``bot`` itself (an empty package module) too."""
COMMAND_TABLE = "bot.commands.table"
"""The one gateway module the channels may import (to register the slash commands)."""
COMPOSITION_ROOT = "bot.app"
"""Builds every part and hands each what it needs: it may import any layer."""
SQL_DRIVERS = ("sqlite3", "aiosqlite", "asyncpg", "psycopg")
CHAT_SDKS = ("telegram", "discord")

KNOWN_VIOLATIONS = {
    (
        "bot.delivery.sender",
        "adapters.chunking",
    ): "delivery cuts replies with the channels' Markdown"
    " chunker; the chunker is platform-neutral and belongs below the gateway",
    ("bot.cli.run", "adapters.console_channel"): "`companion chat` builds the console channel;"
    " building channels belongs in the composition root",
    ("bot.cli.run", "adapters.discord_channel"): "`companion run` builds the channels (as above)",
    ("bot.cli.upkeep", "adapters.discord_check"): "`companion doctor` checks the tokens (ditto)",
    ("bot.cli.run", "adapters.telegram_channel"): "`companion run` builds the channels (as above)",
    ("bot.cli.upkeep", "adapters.telegram_check"): "`companion doctor` checks the tokens (ditto)",
}
"""Imports that break the layers today, each with why; the scale-out issue straightens them.
A pair that no longer occurs must leave this list (see the last test)."""

KNOWN_COMMAND_TABLE_IMPORTS = {
    "bot.admin.table",
    "bot.commands.types",
    "bot.commands.memory",
    "partners.checkins",
}
"""What bot/commands/table.py imports beyond Foundation today: DESIGN.md wants the command table a
leaf (declarations only) with the handlers elsewhere, so that the channels importing it do not
pull in partners. The types moved to bot/commands/types.py and the memory commands to
bot/commands/memory.py; the table still imports them, so its imports may only shrink."""


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
    if importer == COMPOSITION_ROOT:
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
    assert not broken, "imports across DESIGN.md's layers:\n" + "\n".join(sorted(broken))


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


def test_the_command_table_pulls_in_no_more_than_it_does_today() -> None:
    beyond = {b for a, b in import_pairs() if a == COMMAND_TABLE and layer(b) != FOUNDATION}
    assert beyond <= KNOWN_COMMAND_TABLE_IMPORTS, sorted(beyond - KNOWN_COMMAND_TABLE_IMPORTS)


def test_the_known_violations_still_occur() -> None:
    # a straightened import leaves the list, so the list never hides a new one
    pairs = import_pairs()
    assert {pair for pair in KNOWN_VIOLATIONS if pair not in pairs} == set()
    assert {b for a, b in pairs if a == COMMAND_TABLE} >= KNOWN_COMMAND_TABLE_IMPORTS
