"""The `companion` command as a user runs it: a real subprocess against the fake LLM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tarfile
from pathlib import Path

from bot.app.lock import DataDirLock
from bot.store.opening import open_store
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram

COMPANION = [sys.executable, "-m", "bot.cli.main"]
ROOT = Path(__file__).parent.parent


def write_config(tmp_path: Path, base_url: str, extra: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "{base_url}"\napi_key = "sk-test-secret-123"\nmodel = "fake-model"\n'
        f'max_retries = 0\n[storage]\ndata_dir = "{tmp_path / "data"}"\n'
        f'[owner]\ntimezone = "UTC"\n{extra}',
        encoding="utf-8",
    )
    return path


async def companion(
    config: Path,
    *args: str,
    stdin: str | bytes = "",
    timeout: float = 60.0,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(extra_env or {})
    process = await asyncio.create_subprocess_exec(
        *COMPANION,
        "--config",
        str(config),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=env,
    )
    data = stdin.encode() if isinstance(stdin, str) else stdin
    out, err = await asyncio.wait_for(process.communicate(data), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_console_chat_end_to_end_through_stdin(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(text="Hi! I'm Mira."), Reply(text="You said your name is Ana."))
        config = write_config(tmp_path, llm.base_url)
        code, out, err = await companion(config, "chat", stdin="I'm Ana\nwho am I?\n")
    assert code == 0, err
    assert "Mira: Hi! I'm Mira." in out
    assert "Mira: You said your name is Ana." in out
    second = llm.requests[1]["messages"]
    assert any(m["role"] == "assistant" and m["content"] == "Hi! I'm Mira." for m in second)
    assert (tmp_path / "data" / "partners" / "example" / "SOUL.md").exists()


async def test_console_line_that_is_not_utf8_still_gets_its_answer(tmp_path: Path) -> None:
    """Under the C locale (a container without one) Python reads bytes that are not UTF-8 as
    lone surrogates; the line is stored with U+FFFD in their place and answered."""
    async with FakeLLM() as llm:
        llm.script(Reply(text="Bonjour!"))
        config = write_config(tmp_path, llm.base_url)
        code, out, err = await companion(
            config, "chat", stdin=b"caf\xe9 au lait\n", extra_env={"LC_ALL": "C"}, timeout=30
        )
    assert code == 0, err
    assert "Mira: Bonjour!" in out
    assert llm.last_user_text().endswith("caf\ufffd au lait")


async def test_console_commands_work(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        config = write_config(tmp_path, llm.base_url)
        code, out, _ = await companion(config, "chat", stdin="/help\n/admin partners\n")
    assert code == 0
    assert "/partner" in out and "/admin" in out
    assert "Mira (example)" in out
    assert llm.requests == []


async def test_run_beside_a_running_gateway_says_so_without_opening_the_console_first(
    tmp_path: Path,
) -> None:
    """`make run` in a second shell: one line saying the data is in use, not "opening the
    console so you can talk…" followed by a refusal."""
    async with FakeLLM() as llm:
        config = write_config(tmp_path, llm.base_url)
        running = DataDirLock(tmp_path / "data")
        running.acquire()
        try:
            code, out, err = await companion(config, "run", stdin="hello\n")
        finally:
            running.release()
    assert code == 2
    assert "is in use by a running gateway" in err
    assert "opening the console" not in err + out
    assert llm.requests == []


async def test_run_without_a_token_says_it_opens_the_console(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(text="Hi! I'm Mira."))
        config = write_config(tmp_path, llm.base_url)
        code, out, err = await companion(config, "run", stdin="hello\n")
    assert code == 0, err
    assert "No Telegram or Discord token is set: opening the console" in err
    assert re.search(r"To go online, give `\S*companion (--config \S+ )?setup` a bot token", err)
    assert "Mira: Hi! I'm Mira." in out


async def test_unreachable_llm_says_what_to_set(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    code, _, err = await companion(config, "chat", stdin="hello\n")
    assert code == 2
    assert "cannot reach the LLM endpoint http://127.0.0.1:9/v1" in err
    assert "connection refused" in err and "llm.base_url" in err


async def test_config_error_is_one_line_without_traceback(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[llm]\ntimeout = 'soon'\n")
    code, _, err = await companion(config, "doctor")
    assert code == 2
    assert "llm.timeout" in err and "Traceback" not in err


async def test_doctor_redacts_secrets(tmp_path: Path) -> None:
    async with FakeLLM() as llm, FakeTelegram(token="123:SECRET-TG") as telegram:
        config = write_config(
            tmp_path,
            llm.base_url,
            f'telegram_ids = [5]\n[telegram]\ntoken = "123:SECRET-TG"\n'
            f'base_url = "{telegram.base_url}"\n',
        )
        code, out, err = await companion(config, "doctor")
    assert code == 0, out + err
    assert "sk-test-secret-123" not in out + err and "SECRET-TG" not in out + err
    assert "telegram.token: set (hidden)" in out
    assert "answers" in out


async def test_import_then_search_json_round_trip(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        config = write_config(tmp_path, llm.base_url)
        await companion(config, "partners", "list")
        await companion(config, "chat", stdin="")
    records = [
        {
            "session": "s1",
            "user": "telegram:5",
            "role": "user",
            "text": "我们下周去东京旅行",
            "time": "2026-01-02T10:00:00Z",
            "id": "old-1",
            "title": "Trip",
        },
        {
            "session": "s1",
            "user": "telegram:5",
            "role": "assistant",
            "text": "Have fun in Tokyo!",
            "time": 1767348060,
            "id": "old-2",
        },
        {
            "session": "s2",
            "user": "telegram:6",
            "role": "user",
            "text": "Tokyo is my home town",
            "time": "2026-01-03T10:00:00",
            "id": "old-3",
        },
    ]
    source = tmp_path / "history.jsonl"
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n")
    code, out, err = await companion(config, "import", "example", str(source))
    assert code == 0, err
    assert "imported 3 messages" in out
    code, out, _ = await companion(config, "import", "example", str(source))
    assert "imported 0 messages" in out and "3 already there" in out
    code, out, _ = await companion(config, "search", "example", "东京", "--json")
    result = json.loads(out)
    # the reply after it comes back too, below it, through its neighbour's words
    assert [hit["id"] for hit in result["results"]] == ["old-1", "old-2"]
    assert result["results"][0]["session"] == "Trip"
    code, out, _ = await companion(
        config, "search", "example", "--user", "telegram:6", stdin="tokyo\nnothing here\n"
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert [[h["id"] for h in line["results"]] for line in lines] == [["old-3"], []]


async def test_importing_the_same_file_again_adds_no_sessions(tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/v1")
    code, _, err = await companion(config, "partners", "new", "example", "--name", "Mira")
    assert code == 0, err
    source = tmp_path / "history.jsonl"
    lines = [
        {"session": name, "user": "u1", "role": "user", "text": f"hello {name}", "time": 1.0}
        for name in ("s1", "s2")
    ]
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    for _ in range(3):
        code, _, err = await companion(config, "import", "example", str(source))
        assert code == 0, err
    store = await open_store(tmp_path / "data" / "gateway.db")
    try:
        sessions = await store.sessions_of("example")
    finally:
        await store.close()
    assert sorted(s.title for s in sessions) == ["hello s1", "hello s2"]


async def test_import_reports_the_bad_line(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        config = write_config(tmp_path, llm.base_url)
        await companion(config, "chat", stdin="")
    source = tmp_path / "bad.jsonl"
    source.write_text(
        '{"session": "s", "user": "u", "role": "user", "text": "a", "time": 1}\n'
        '{"session": "s", "user": "u", "role": "robot", "text": "b", "time": 1}\n'
    )
    code, _, err = await companion(config, "import", "example", str(source))
    assert code == 2 and "line 2: role must be user or assistant" in err


async def test_backup_contains_database_and_partner_files(tmp_path: Path) -> None:
    async with FakeLLM() as llm:
        llm.script(Reply(text="hello"))
        config = write_config(tmp_path, llm.base_url)
        await companion(config, "chat", stdin="hi\n")
    target = tmp_path / "backup.tar.gz"
    code, out, err = await companion(config, "backup", str(target))
    assert code == 0, err
    with tarfile.open(target) as archive:
        names = archive.getnames()
    assert "data/gateway.db" in names
    assert "data/partners/example/SOUL.md" in names
    assert not any(name.endswith("gateway.lock") for name in names)
