"""``companion import`` with the histories people bring from other apps, as a user runs it:
the project's JSONL, SillyTavern chat files, Telegram Desktop exports and ChatGPT's
conversations, detected by their shape; times in every form those apps write; re-importing adds
nothing; and the partner finds the imported history in the next chat turn. The fixtures in
tests/data/histories/ were written for these tests in each app's shape."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from bot.cli.history_formats import detect
from bot.cli.history_formats.messages import BadHistory
from bot.cli.history_formats.times import BadTime, parse_time
from bot.store import NewMessage
from bot.store.migrations.step import Dialects
from bot.store.migrations.step_24_impossible_message_times import STEP as REPAIR_STEP
from bot.store.opening import open_store
from bot.store.search_rows import SearchHit
from partners.tools import format_hit
from tests.conftest import StoreBackend
from tests.fakes.fake_llm import FakeLLM, Reply, ToolCallSpec
from tests.test_cli import companion, write_config

HISTORIES = Path(__file__).parent / "data" / "histories"
OFFLINE = "http://127.0.0.1:9/v1"


async def new_partner(tmp_path: Path, base_url: str = OFFLINE) -> Path:
    config = write_config(tmp_path, base_url)
    code, _, err = await companion(config, "partners", "new", "example", "--name", "Mira")
    assert code == 0, err
    return config


async def stored(tmp_path: Path) -> list[tuple[str, str, str, str]]:
    """(audience, role, text, time) of every message of the partner, in the order stored."""
    store = await open_store(tmp_path / "data" / "gateway.db")
    try:
        rows = await store.partner_messages("example")
    finally:
        await store.close()
    return [
        (r.audience, r.role, r.text, datetime.fromtimestamp(r.created_at, UTC).isoformat()[:19])
        for r in rows
    ]


async def import_twice(config: Path, source: Path, *args: str) -> None:
    """Import ``source``, then again: the second adds nothing."""
    code, out, err = await companion(config, "import", "example", str(source), *args)
    assert code == 0, err
    code, again, err = await companion(config, "import", "example", str(source), *args)
    assert code == 0 and "imported 0 messages" in again, (again, err)


def jsonl(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n")
    return path


def line(text: Any, time: Any, role: str = "user", **extra: Any) -> dict[str, Any]:
    return {"session": "s1", "user": "u1", "role": role, "text": text, "time": time, **extra}


async def search(config: Path, query: str, *args: str) -> list[dict[str, Any]]:
    code, out, err = await companion(config, "search", "example", query, "--json", *args)
    assert code == 0, err
    return list(json.loads(out)["results"])


# -- times ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1717599420, "2024-06-05T14:57:00"),
        (1717599420000, "2024-06-05T14:57:00"),
        ("1717599420000", "2024-06-05T14:57:00"),
        ("1699996400", "2023-11-14T21:13:20"),
        ("2024-06-05T14:57:00Z", "2024-06-05T14:57:00"),
        ("June 5, 2024 2:57pm", "2024-06-05T14:57:00"),
        ("June 5, 2024 12:05am", "2024-06-05T00:05:00"),
        ("2024-6-5 @14h 57m 0s 682ms", "2024-06-05T14:57:00.682000"),
        ("2024-6-5@14h57m00s", "2024-06-05T14:57:00"),
    ],
)
def test_every_form_of_time_the_apps_write_is_read(value: Any, expected: str) -> None:
    moment = datetime.fromtimestamp(parse_time(value), UTC).replace(tzinfo=None)
    assert moment.isoformat() == expected


@pytest.mark.parametrize(
    "value", [10**18, -5, float("nan"), "yesterday", "February 30, 2024 1:00pm", True, None]
)
def test_an_impossible_time_is_refused(value: Any) -> None:
    with pytest.raises(BadTime):
        parse_time(value)


# -- the project's JSONL: the two defects -------------------------------------------------


async def test_milliseconds_are_stored_as_the_day_they_were_and_search_shows_it(
    tmp_path: Path,
) -> None:
    config = await new_partner(tmp_path)
    source = jsonl(tmp_path / "h.jsonl", line("we saw puffins at the lighthouse", 1717599420000))
    code, out, err = await companion(config, "import", "example", str(source))
    assert code == 0, err
    hits = await search(config, "puffins")
    assert [h["time"] for h in hits] == ["2024-06-05T14:57:00+00:00"]
    code, out, err = await companion(config, "search", "example", "puffins")
    assert code == 0 and "2024-06-05 14:57" in out, err


async def test_an_impossible_time_is_refused_with_its_line(tmp_path: Path) -> None:
    config = await new_partner(tmp_path)
    source = jsonl(tmp_path / "h.jsonl", line("fine", 1717599420), line("bad", 10**20))
    code, _, err = await companion(config, "import", "example", str(source))
    assert code == 2 and "line 2: time" in err and "not a possible time" in err
    assert "Traceback" not in err


async def test_a_list_of_text_entities_is_stored_as_its_text(tmp_path: Path) -> None:
    config = await new_partner(tmp_path)
    entities = ["my starter is ", {"type": "bold", "text": "Bubbles"}, "!"]
    source = jsonl(tmp_path / "h.jsonl", line(entities, 1717599420))
    code, _, err = await companion(config, "import", "example", str(source))
    assert code == 0, err
    assert [h["text"] for h in await search(config, "Bubbles")] == ["my starter is Bubbles!"]


async def test_a_text_that_is_no_text_is_refused_with_its_line(tmp_path: Path) -> None:
    config = await new_partner(tmp_path)
    source = jsonl(tmp_path / "h.jsonl", line({"what": "an object"}, 1717599420))
    code, _, err = await companion(config, "import", "example", str(source))
    assert code == 2 and "line 1: text must be a string" in err


# -- the formats of other apps --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sillytavern.jsonl", "sillytavern"),
        ("telegram_chat.json", "telegram"),
        ("telegram_export.json", "telegram"),
        ("chatgpt.json", "chatgpt"),
    ],
)
def test_the_format_is_told_by_the_files_shape(name: str, expected: str) -> None:
    assert detect(HISTORIES / name) == expected


def test_a_file_of_no_known_shape_is_refused_naming_the_formats(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("dear diary\n")
    with pytest.raises(BadHistory, match="--format .*sillytavern"):
        detect(tmp_path / "notes.txt")


async def test_a_sillytavern_chat_keeps_the_chosen_swipes_and_leaves_out_system_lines(
    tmp_path: Path,
) -> None:
    config = await new_partner(tmp_path)
    await import_twice(config, HISTORIES / "sillytavern.jsonl")
    assert await stored(tmp_path) == [
        ("user:import:Ana", "assistant", "Welcome back! How was the lighthouse trip?",
         "2024-06-05T14:56:00"),
        ("user:import:Ana", "user", "We climbed the lighthouse at Peggy's Cove and saw puffins.",
         "2024-06-05T14:57:00"),
        ("user:import:Ana", "assistant", "Puffins! Did they let you get close?",
         "2024-06-05T15:04:10"),
        ("user:import:Ana", "user", "Only from the rocks, with binoculars.", "2024-06-05T15:06:00"),
    ]  # fmt: skip


async def test_a_telegram_chat_flattens_entities_and_leaves_out_service_and_photos(
    tmp_path: Path,
) -> None:
    config = await new_partner(tmp_path)
    source = HISTORIES / "telegram_chat.json"
    code, _, err = await companion(config, "import", "example", str(source))
    assert code == 2 and "--as-user" in err and "'Ana'" in err and "'Mira Bot'" in err
    await import_twice(config, source, "--as-user", "Ana")
    assert await stored(tmp_path) == [
        ("user:telegram:5", "user",
         "My sourdough starter is called Bubbles, see https://example.org/bread",
         "2023-11-14T21:13:20"),
        ("user:telegram:5", "assistant", "Bubbles is a wonderful name for a starter.",
         "2023-11-14T21:14:00"),
    ]  # fmt: skip
    hits = await search(config, "sourdough", "--user", "telegram:5")
    assert "Bubbles" in hits[0]["text"] and hits[0]["session"] == "Mira"


async def test_one_chat_of_a_whole_telegram_export_is_chosen_by_name(tmp_path: Path) -> None:
    config = await new_partner(tmp_path)
    source = HISTORIES / "telegram_export.json"
    code, _, err = await companion(config, "import", "example", str(source))
    assert code == 2 and "--chat" in err and "'Book club'" in err
    # the export's own account is the user: no --as-user needed
    await import_twice(config, source, "--chat", "Mira")
    assert await stored(tmp_path) == [
        ("user:telegram:5", "user", "I adopted a tortoise named Quincy.", "2023-03-01T09:00:00"),
        ("user:telegram:5", "assistant", "Quincy sounds dignified.", "2023-03-01T09:01:00"),
    ]


async def test_chatgpt_imports_the_branch_the_app_shows(tmp_path: Path) -> None:
    config = await new_partner(tmp_path)
    await import_twice(config, HISTORIES / "chatgpt.json")
    assert await stored(tmp_path) == [
        ("owner", "user", "Which tomatoes grow well on a balcony?",
         "2024-03-09T16:00:10"),
        ("owner", "assistant",
         "Cherry tomatoes such as Sungold grow well in pots.", "2024-03-09T16:00:30"),
        ("owner", "user", "I planted Sungold today.", "2024-03-09T16:00:40"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "args", "query", "found"),
    [
        ("chatgpt.json", (), "balcony tomatoes", "Which tomatoes grow well on a balcony?"),
        ("sillytavern.jsonl", ("--as-user", "owner"), "puffins", "saw puffins"),
    ],
)  # fmt: skip
async def test_the_partner_finds_the_imported_history_in_the_next_turn(
    tmp_path: Path, name: str, args: tuple[str, ...], query: str, found: str
) -> None:
    async with FakeLLM() as llm:
        config = await new_partner(tmp_path, llm.base_url)
        code, _, err = await companion(config, "import", "example", str(HISTORIES / name), *args)
        assert code == 0, err
        llm.script(
            Reply(tool_calls=[ToolCallSpec("partner_search", {"query": query})]),
            Reply(text="I remember."),
        )
        code, out, err = await companion(config, "chat", stdin="do you remember?\n")
    assert code == 0 and "I remember." in out, err
    results = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert found in results[0]


# -- rows stored before: the repair and search's own defence --------------------------------


async def test_the_schema_step_repairs_times_past_the_year_9999(
    store_backend: StoreBackend,
) -> None:
    store = await store_backend.open()
    try:
        session = await store.create_session(
            partner_id="example", chat_key="import:example:s1", user_key="import:u1",
            audience="user:import:u1", system_prompt="", kind="import",
        )  # fmt: skip
        times = {"millis": 1717599420000.0, "huge": 1e30, "fine": 1717599420.0}
        for text, created_at in times.items():
            await store.add_message(
                NewMessage("import:example:s1", "user", f"{text} puffins", "user:import:u1",
                           dedup_key=text, session_id=session.id, partner_id="example",
                           created_at=created_at)
            )  # fmt: skip
    finally:
        await store.close()
    await run_the_repair_step_again(store_backend)
    store = await store_backend.open()
    try:
        rows = {r.text: r.created_at for r in await store.partner_messages("example")}
    finally:
        await store.close()
    assert rows == {
        "millis puffins": 1717599420.0,
        "huge puffins": session.created_at,
        "fine puffins": 1717599420.0,
    }


async def run_the_repair_step_again(backend: StoreBackend) -> None:
    """Run the schema step that repairs impossible times once more, as opening a database
    stored before it does (later steps cannot be undone to reopen it at that version)."""
    assert isinstance(REPAIR_STEP, Dialects)
    if backend.name == "sqlite":
        assert isinstance(REPAIR_STEP.sqlite, str)
        with sqlite3.connect(backend.location) as db:
            db.executescript(REPAIR_STEP.sqlite)
        return
    assert isinstance(REPAIR_STEP.postgres, str)
    db = await asyncpg.connect(str(backend.location))
    try:
        await db.execute(REPAIR_STEP.postgres)
    finally:
        await db.close()


def test_a_hit_at_an_impossible_time_is_still_shown() -> None:
    hit = SearchHit(1, "Trip", "user", "we saw puffins", 1717599420000.0 * 1000, "old-1")
    assert "unknown time" in format_hit(hit, "puffins")
