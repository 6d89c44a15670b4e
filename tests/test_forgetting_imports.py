"""A history imported after ``/forget history`` never brings the forgotten messages back:
``/forget history`` leaves a tombstone (a hash) of each message it removed, and
``companion import`` does not store a message of that user whose text a tombstone matches
(it counts it instead). Another user's words are theirs and are imported. On both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.store.opening import open_store
from tests.conftest import Harness, HarnessFactory, dm
from tests.fakes.fake_llm import Reply
from tests.test_cli import companion
from tests.test_forgetting import USER, USER_KEY, command, new_secret


def cli_config(harness: Harness, storage: dict[str, Any]) -> Path:
    """A config.toml for ``companion`` on the harness's data directory and database."""
    data_dir = harness.config.data_dir
    url = storage.get("database_url")
    path = data_dir.parent / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "{harness.llm.base_url}"\napi_key = "sk-test"\nmodel = "m"\n'
        f'[storage]\ndata_dir = "{data_dir}"\n' + (f'database_url = "{url}"\n' if url else ""),
        encoding="utf-8",
    )
    return path


def history(path: Path, *records: tuple[str, str, str]) -> Path:
    """A JSONL history of (user, role, text) records in one conversation."""
    lines = [
        json.dumps(
            {"session": "old-app", "user": user, "role": role, "text": text, "time": 1_700_000 + i}
        )
        for i, (user, role, text) in enumerate(records)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def forgotten_conversation(harness: Harness, said: str, answered: str) -> None:
    """The user says ``said``, the partner answers ``answered``, the user forgets history."""
    harness.llm.script(Reply(text=answered))
    await harness.send(dm(USER, said))
    await harness.settle()
    assert "messages are gone" in await command(harness, "/forget history confirm")
    await harness.app.stop()


async def stored_texts(harness: Harness, user_key: str) -> list[str]:
    store = await open_store(harness.config.database)
    try:
        return [row.text for row in await store.user_messages("example", user_key)]
    finally:
        await store.close()


async def test_import_leaves_out_the_messages_a_user_forgot(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory, tmp_path: Path
) -> None:
    harness = await harness_factory(storage=storage_on_each_backend)
    secret = new_secret()
    said, answered = f"my secret island is {secret}", f"{secret} sounds lovely"
    await forgotten_conversation(harness, said, answered)
    file = history(
        tmp_path / "old.jsonl",
        (USER_KEY, "user", said),
        (USER_KEY, "assistant", answered),
        (USER_KEY, "user", "and I like long walks"),
    )
    code, out, err = await companion(
        cli_config(harness, storage_on_each_backend), "import", "example", str(file)
    )
    assert code == 0, err
    texts = await stored_texts(harness, USER_KEY)
    assert [t for t in texts if secret in t] == []
    assert texts == ["and I like long walks"]
    assert "imported 1 messages" in out and "2 forgotten" in out


async def test_import_keeps_another_users_same_words(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory, tmp_path: Path
) -> None:
    harness = await harness_factory(storage=storage_on_each_backend)
    said = f"my secret island is {new_secret()}"
    await forgotten_conversation(harness, said, "how nice")
    file = history(tmp_path / "old.jsonl", ("test:43", "user", said))
    code, out, err = await companion(
        cli_config(harness, storage_on_each_backend), "import", "example", str(file)
    )
    assert code == 0, err
    assert await stored_texts(harness, "test:43") == [said]
    assert "imported 1 messages" in out
