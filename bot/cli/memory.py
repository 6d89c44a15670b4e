"""``companion memory show|export|edit``: a partner's memory documents from the terminal,
wherever they are kept (files or database rows, see :mod:`bot.gateway.memory_documents`). The owner
works with Markdown files either way: ``export`` writes them to a folder, ``edit`` opens one in
``$EDITOR`` and saves it back only onto the version it was copied from."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import TypeVar

from bot.app import owner_memory_file
from bot.cli.data import CLIError
from bot.cli.invocation import program
from bot.config.model import Config
from bot.gateway.memory_documents import memory_store
from bot.store.opening import open_store
from partners.documents import StoredDocument
from partners.memory import MemoryFile, MemoryStore
from partners.memory_errors import FileChanged
from partners.memory_format import fingerprint
from partners.persona import PARTNER_FILES, check_partner_id
from partners.tools import user_memory_name

T = TypeVar("T")
EXPORTED_FOLDERS = ("", "users", "memory", "changelog")
"""Where a partner's documents are: its own files, per-user memory, journals, changelog."""


def _with_memory(config: Config, work: Callable[[MemoryStore], Awaitable[T]]) -> T:
    async def go() -> T:
        store = await open_store(config.database)
        try:
            return await work(memory_store(config, store))
        finally:
            await store.close()

    return asyncio.run(go())


def partner_root(config: Config, partner_id: str) -> Path:
    return config.data_dir / "partners" / check_partner_id(partner_id)


def cmd_memory_show(config: Config, args: argparse.Namespace) -> int:
    root = partner_root(config, args.partner)

    async def show(memory: MemoryStore) -> list[tuple[str, str]]:
        sections = [
            ("Owner's shared memory", await memory.read(owner_memory_file(config))),
            (f"{args.partner}'s own memory", await memory.read(MemoryFile(root, "MEMORY.md"))),
        ]
        if args.user:
            file = MemoryFile(root, user_memory_name(args.user))
            sections.append((f"About {args.user}", await memory.read(file)))
        return sections

    shown = _with_memory(config, show)
    print("\n\n".join(f"## {title}\n{text.strip() or '(empty)'}" for title, text in shown))
    return 0


def cmd_memory_export(config: Config, args: argparse.Namespace) -> int:
    root = partner_root(config, args.partner)
    target = Path(args.dir)

    async def export(memory: MemoryStore) -> list[tuple[str, bytes]]:
        found = []
        for folder in EXPORTED_FOLDERS:
            for name in await memory.documents.names(root, folder):
                found.append((name, (await memory.documents.read(root, name)).data))
        return found

    documents = _with_memory(config, export)
    if not documents:
        raise CLIError(f"partner {args.partner!r} has no documents; `{program()} partners list`")
    for name, data in documents:
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    print(f"wrote {len(documents)} documents of {args.partner} to {target}")
    return 0


def cmd_memory_edit(config: Config, args: argparse.Namespace) -> int:
    root = partner_root(config, args.partner)
    name = _document_name(args.file)
    file = MemoryFile(root, name)
    before: StoredDocument = _with_memory(config, lambda memory: memory.stored(file))
    edited = edit_in_editor(before.data, PurePosixPath(name).name)
    if edited == before.data:
        print(f"{name} is unchanged: nothing saved")
        return 0
    text = edited.decode("utf-8", errors="replace")

    async def save(memory: MemoryStore) -> str | None:
        result = await memory.replace_file(
            file, text, fingerprint(before.data), reason="edited by the owner", source="cli"
        )
        return result.change_id

    try:
        change = _with_memory(config, save)
    except FileChanged:
        kept = keep_beside(Path(tempfile.mkdtemp(prefix="companion-edit-")), name, edited)
        raise CLIError(
            f"{name} changed while you edited it (a review or another edit wrote to it); "
            f"nothing was overwritten. Your text is in {kept}: run the edit again and merge it"
        ) from None
    print(f"saved {name} of {args.partner} (change {change})" if change else "nothing to save")
    return 0


def _document_name(name: str) -> str:
    path = PurePosixPath(name)
    if path.as_posix() in PARTNER_FILES:
        raise CLIError(
            f"{name} is one of the partner's own files, not a memory document: edit it with "
            f"`{program()} partners edit <id> {name}` (checked before it is saved)"
        )
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise CLIError(
            f"{name!r} is not a document of the partner: name it as `{program()} memory export` "
            "lists it, such as MEMORY.md or users/telegram_123.md"
        )
    return path.as_posix()


def edit_in_editor(data: bytes, base_name: str) -> bytes:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="companion-edit-") as folder:
        copy = Path(folder) / base_name
        copy.write_bytes(data)
        finished = subprocess.run([*shlex.split(editor), str(copy)], check=False)
        if finished.returncode != 0:
            raise CLIError(
                f"the editor ({editor}) failed with {finished.returncode}; nothing saved"
            )
        return copy.read_bytes()


def keep_beside(folder: Path, name: str, data: bytes) -> Path:
    """The owner's edited text, kept in a folder of its own for a second try."""
    path = folder / PurePosixPath(name).name
    path.write_bytes(data)
    return path
