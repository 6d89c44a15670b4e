"""config.toml as its owner wrote it, changed key by key and written back whole.

``companion setup`` edits the file with tomlkit, which keeps everything it does not touch —
comments, blank lines, key order, other sections — byte for byte, so running setup again only
changes the values it asks about. The file is replaced atomically (a crash leaves the old one)
and, once it holds a token or key written out literally, readable by its owner only.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table

from bot.config.model import ConfigError, read_config_text

NEW_FILE_HEADER = (
    "companion-gateway configuration, written by `companion setup`.",
    "config.example.toml documents every key; run `companion setup` again to change these.",
)
PRIVATE_MODE = 0o600


class ConfigFile:
    """One config.toml, parsed with its formatting; nothing is written before :meth:`save`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        text = read_config_text(path, named=False)
        self.existed = text is not None
        try:
            self.doc = tomlkit.parse(text) if text is not None else _new_document()
        except TOMLKitError as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax there") from None

    def get(self, section: str, key: str) -> Any:
        """The value as written (``"${NAME}"`` references unexpanded), or None."""
        table = self.doc.get(section)
        if not isinstance(table, Table) or key not in table:
            return None
        return table[key].unwrap() if hasattr(table[key], "unwrap") else table[key]

    def set(self, section: str, key: str, value: Any) -> None:
        table = self.doc.get(section)
        if not isinstance(table, Table):
            table = tomlkit.table()
            self.doc[section] = table
        table[key] = value

    def remove(self, section: str, key: str) -> None:
        table = self.doc.get(section)
        if isinstance(table, Table) and key in table:
            del table[key]

    def text(self) -> str:
        return tomlkit.dumps(self.doc)

    def save(self, private: bool) -> None:
        """Replace the file atomically; ``private`` (a literal secret inside) makes it 0600."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mode = PRIVATE_MODE if private else self._mode()
        temporary: str | None = None
        try:
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".config-")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(self.text())
            os.chmod(temporary, mode)
            os.replace(temporary, self.path)
        except OSError as exc:
            if temporary is not None and os.path.exists(temporary):
                os.unlink(temporary)
            raise ConfigError(
                f"{self.path} cannot be written ({exc.strerror}); in Docker, mount the config "
                "directory writable while you run setup"
            ) from None

    def _mode(self) -> int:
        try:
            return stat.S_IMODE(self.path.stat().st_mode)
        except FileNotFoundError:
            return 0o644


def _new_document() -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    for line in NEW_FILE_HEADER:
        doc.add(tomlkit.comment(line))
    doc.add(tomlkit.nl())
    return doc
