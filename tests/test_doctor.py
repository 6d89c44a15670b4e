"""`companion doctor` checks what breaks a first run — the LLM endpoint (reachable, /v1, the
model, the key), each chat token, an owner for each enabled platform, the data directory and
the partners — with one line per failure naming the fix. Real clients against the fakes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.app import build_app
from bot.cli.main import main
from bot.config.model import load_config
from bot.store.opening import open_store
from tests.fakes.fake_discord import BOT_TOKEN, FakeDiscord, point_discord_at
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM
from tests.fakes.fake_telegram import TOKEN, FakeTelegram
from tests.first_run import (
    new_bot,  # noqa: F401 (the telegram fixture)
    wrong_endpoint,
    wrong_endpoints,
)


@pytest.fixture
async def discord_fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(application_id=4321) as fake:
        restore = point_discord_at(fake)
        try:
            yield fake
        finally:
            restore()


@pytest.fixture(autouse=True)
def no_openai_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The key (and config) of whoever runs the tests stays out of them."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("COMPANION_CONFIG", raising=False)
    yield


def write_config(tmp_path: Path, llm: str, body: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "{llm}"\nmodel = "{FAKE_MODEL_ID}"\nmax_retries = 0\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n{body}',
        encoding="utf-8",
    )
    return path


async def doctor(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["--config", str(config), "doctor"])
    out = capsys.readouterr().out
    return code, out.splitlines()


def bad(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("BAD")]


async def test_a_good_setup_is_all_ok_and_shows_what_the_owner_needs(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    discord_fake: FakeDiscord,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(
        tmp_path,
        fake_llm.base_url,
        f'[owner]\ntelegram_ids = [42]\ndiscord_ids = [1]\n[telegram]\ntoken = "{TOKEN}"\n'
        f'base_url = "{telegram.base_url}"\n[discord]\ntoken = "{BOT_TOKEN}"\n'
        f'api_base = "{discord_fake.api_base}"\n',
    )
    code, lines = await doctor(config, capsys)
    text = "\n".join(lines)
    assert code == 0, text
    assert bad(lines) == []
    assert "llm.api_key: not set (not needed for this local endpoint)" in text
    assert f"LLM endpoint {fake_llm.base_url} answers with model {FAKE_MODEL_ID}" in text
    assert "telegram: the token works for @mira_home_bot" in text
    assert "client_id=4321" in text and "permissions=277562330112" in text
    assert "telegram owner: 42 (config.toml)" in text
    assert TOKEN not in text and BOT_TOKEN not in text


@wrong_endpoints
async def test_each_wrong_endpoint_is_one_bad_line_with_the_fix(
    tmp_path: Path,
    fake_llm: FakeLLM,
    capsys: pytest.CaptureFixture[str],
    case: str,
    fix: str,
) -> None:
    url = wrong_endpoint(fake_llm, case)
    code, lines = await doctor(write_config(tmp_path, url), capsys)
    assert code == 1
    [line] = bad(lines)
    assert fix in line


async def test_a_rejected_chat_token_is_named(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(
        tmp_path,
        fake_llm.base_url,
        '[owner]\ntelegram_ids = [42]\n[telegram]\ntoken = "999:WRONG"\n'
        f'base_url = "{telegram.base_url}"\n',
    )
    code, lines = await doctor(config, capsys)
    assert code == 1
    [line] = bad(lines)
    assert "telegram.token was rejected" in line and "@BotFather" in line
    assert "WRONG" not in "\n".join(lines)


async def test_the_message_content_intent_switched_off_is_named(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeDiscord(allowed_privileged_intents=0) as fake:
        restore = point_discord_at(fake)
        try:
            config = write_config(
                tmp_path,
                fake_llm.base_url,
                f'[owner]\ndiscord_ids = [1]\n[discord]\ntoken = "{BOT_TOKEN}"\n'
                f'api_base = "{fake.api_base}"\n',
            )
            code, lines = await doctor(config, capsys)
        finally:
            restore()
    assert code == 1
    [line] = bad(lines)
    assert "Message Content Intent" in line and "Developer Portal" in line


async def test_an_enabled_platform_without_an_owner_is_bad_until_claimed(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = write_config(
        tmp_path,
        fake_llm.base_url,
        f'[telegram]\ntoken = "{TOKEN}"\nbase_url = "{telegram.base_url}"\n',
    )
    code, lines = await doctor(config, capsys)
    assert code == 1
    [line] = bad(lines)
    assert "nobody owns the bot on telegram" in line and "/claim" in line
    assert "owner.telegram_ids" in line

    store = await open_store(tmp_path / "data" / "gateway.db")
    await store.add_claim_code("hash", "telegram", 60)
    assert await store.redeem_claim("hash", "telegram", "telegram:777")
    await store.close()
    code, lines = await doctor(config, capsys)
    assert code == 0, lines
    today = datetime.now(UTC).date().isoformat()
    assert any(f"telegram owner: 777 (claimed {today})" in line for line in lines)


def with_password(url: str) -> str:
    """The test server's URL with a password in it (the server trusts its socket, so any
    password is let in): what must never be shown."""
    return url.replace("postgresql://postgres@", "postgresql://postgres:hunter2@")


async def test_a_postgresql_database_is_checked_and_its_password_never_shown(
    tmp_path: Path,
    fake_llm: FakeLLM,
    postgres_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = with_password(postgres_database)
    config = write_config(tmp_path, fake_llm.base_url, f'database_url = "{url}"\n')
    _, lines = await doctor(config, capsys)
    text = "\n".join(lines)
    assert bad(lines) == [], text
    assert "hunter2" not in text
    assert f"ok  database {url.replace('hunter2', '***')} answers (PostgreSQL" in text
    assert "database schema 0 of" in text  # doctor did not create the tables
    store = await open_store(url)
    await store.close()
    _, lines = await doctor(config, capsys)
    assert any(line.endswith("(current)") for line in lines), lines


async def test_an_unreachable_database_is_one_bad_line_with_the_fix(
    tmp_path: Path,
    fake_llm: FakeLLM,
    postgres_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = with_password(postgres_database).replace("/test_", "/missing_")
    config = write_config(tmp_path, fake_llm.base_url, f'database_url = "{url}"\n')
    _, lines = await doctor(config, capsys)
    (line,) = bad(lines)
    assert "does not exist" in line and "storage.database_url" in line
    assert "hunter2" not in "\n".join(lines)


async def test_backup_on_postgresql_names_pg_dump_and_writes_nothing(
    tmp_path: Path,
    fake_llm: FakeLLM,
    postgres_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = with_password(postgres_database)
    config = write_config(tmp_path, fake_llm.base_url, f'database_url = "{url}"\n')
    target = tmp_path / "backup.tar.gz"
    code = await asyncio.to_thread(main, ["--config", str(config), "backup", str(target)])
    err = capsys.readouterr().err
    assert code == 2
    assert "pg_dump" in err and "hunter2" not in err
    assert not target.exists()


# ---- a worker the environment configures ------------------------------------------------


def worker_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, llm: str, **settings: str
) -> None:
    """No config file, only ``COMPANION_*`` variables: what compose.yaml gives a worker."""
    monkeypatch.setenv("COMPANION_CONFIG", "")
    monkeypatch.setenv("COMPANION_LLM__BASE_URL", llm)
    monkeypatch.setenv("COMPANION_LLM__MODEL", FAKE_MODEL_ID)
    monkeypatch.setenv("COMPANION_LLM__MAX_RETRIES", "0")
    monkeypatch.setenv("COMPANION_STORAGE__DATA_DIR", str(tmp_path / "data"))
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


async def run_doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["doctor"])
    return code, capsys.readouterr().out


async def test_doctor_names_the_keys_the_environment_set_and_hides_their_secrets(
    tmp_path: Path,
    fake_llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker_environment(
        monkeypatch, tmp_path, fake_llm.base_url, COMPANION_LLM__API_KEY="sk-env-SECRET"
    )
    code, out = await run_doctor(capsys)
    assert code == 0, out
    assert "config: no config file; the environment (COMPANION_* variables) and defaults" in out
    assert (
        "from the environment: llm.api_key, llm.base_url, llm.max_retries, llm.model, "
        "storage.data_dir" in out
    )
    assert "sk-env-SECRET" not in out


async def test_a_worker_on_postgresql_is_told_what_it_reads_from_the_database(
    tmp_path: Path,
    fake_llm: FakeLLM,
    postgres_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = with_password(postgres_database)
    worker_environment(
        monkeypatch, tmp_path, fake_llm.base_url, COMPANION_STORAGE__DATABASE_URL=url
    )
    _, out = await run_doctor(capsys)
    assert "hunter2" not in out
    assert "this worker reads messages, sessions, users, bindings and settings" in out
    assert (
        "memory, journals, the changelog and the partners (preset.yml, persona, card, "
        "lorebook, avatar) from the database" in out
    )
    assert "partners/ directory" not in out
    assert "needs its data directory only for its lock and status file" in out


async def test_doctor_shows_the_partner_catalog_in_the_database_and_each_workers_version(
    tmp_path: Path,
    fake_llm: FakeLLM,
    postgres_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker_environment(
        monkeypatch,
        tmp_path,
        fake_llm.base_url,
        COMPANION_STORAGE__DATABASE_URL=postgres_database,
        COMPANION_WORKERS__ID="w1",
    )
    config = load_config(None)
    app = await build_app(config, {})
    try:
        await app.start()
        await app.catalog.new("luna", "Luna")
        _, out = await run_doctor(capsys)
    finally:
        await app.stop()
    version = app.catalog.version
    assert f"ok  partners: example, luna — 2 (catalog version {version}) in the database" in out
    assert f"worker w1 has loaded partners: 2 (catalog version {version})" in out
    assert not (tmp_path / "data" / "partners").exists()


async def test_memory_kept_as_files_on_postgresql_is_named_as_not_shared(
    tmp_path: Path,
    fake_llm: FakeLLM,
    postgres_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker_environment(
        monkeypatch,
        tmp_path,
        fake_llm.base_url,
        COMPANION_STORAGE__DATABASE_URL=postgres_database,
        COMPANION_STORAGE__DOCUMENTS="files",
    )
    _, out = await run_doctor(capsys)
    assert (
        "memory, journals and the changelog are files in the data directory "
        '(storage.documents = "files")' in out
    )
    assert "other workers do not see them" in out


async def test_a_gateway_on_sqlite_gets_no_worker_section(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lines = await doctor(write_config(tmp_path, fake_llm.base_url), capsys)
    assert not any("this worker" in line for line in lines)
    assert not any("from the environment" in line for line in lines)
