"""`companion setup` against the fakes: the interactive first run (answers piped in) and the
non-interactive form for scripts and Docker. Every endpoint problem is named with its fix and
writes nothing; a re-run edits values and keeps the owner's comments; the claim code it
prints is one the gateway accepts."""

from __future__ import annotations

import asyncio
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.config.model import load_config
from bot.gateway.claims import code_hash
from bot.store.opening import open_store
from tests.fakes.fake_discord import BOT_TOKEN, FakeDiscord, point_discord_at
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM
from tests.fakes.fake_telegram import TOKEN, FakeTelegram
from tests.first_run import (
    BOT,
    new_bot,  # noqa: F401 (the telegram fixture)
    wrong_endpoint,
    wrong_endpoints,
)
from tests.test_llm_check import refused_port


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only the variables a test sets: never the key of whoever runs the tests."""
    for name in ("OPENAI_API_KEY", "COMPANION_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    yield


def existing_config(tmp_path: Path, telegram: FakeTelegram | None = None, extra: str = "") -> Path:
    """A config.toml the owner started by hand: comments, a data dir, a Bot API server."""
    path = tmp_path / "config.toml"
    text = (
        "# my companion, set up by hand first\n"
        "[storage]\n"
        f'data_dir = "{tmp_path / "data"}"  # keep it next to the config\n'
    )
    if telegram is not None:
        text += f'\n[telegram]\n# a local Bot API server\nbase_url = "{telegram.base_url}"\n'
    path.write_text(text + extra, encoding="utf-8")
    return path


async def setup(
    config: Path, capsys: pytest.CaptureFixture[str], *args: str, answers: str | None = None
) -> tuple[int, str]:
    """``companion setup ARGS``; ``answers`` piped to its questions. Returns (exit, stderr)."""
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(answers or ""))
        code = await asyncio.to_thread(main, ["--config", str(config), "setup", *args])
    return code, capsys.readouterr().err


def claim_code(stderr: str) -> str:
    line = next(line for line in stderr.splitlines() if line.strip().startswith("/claim "))
    return line.split()[1]


async def live_claims(tmp_path: Path, platform: str) -> list[str]:
    store = await open_store(tmp_path / "data" / "gateway.db")
    try:
        return await store.live_claim_codes(platform)
    finally:
        await store.close()


async def test_the_non_interactive_form_writes_a_checked_config_and_offers_a_claim(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path, telegram)
    code, err = await setup(
        config,
        capsys,
        "--llm-base-url", fake_llm.base_url,
        "--model", FAKE_MODEL_ID,
        "--telegram-token-env", "TG_TOKEN",
    )  # fmt: skip
    assert code == 0, err
    text = config.read_text(encoding="utf-8")
    assert 'token = "${TG_TOKEN}"' in text and TOKEN not in text
    assert f'base_url = "{fake_llm.base_url}"' in text
    assert "# a local Bot API server" in text and "# keep it next to the config" in text
    assert f"@{BOT}" in err and f"https://t.me/{BOT}?start=" in err
    assert await live_claims(tmp_path, "telegram") == [code_hash(claim_code(err))]
    loaded = load_config(config)
    assert loaded.llm.model == FAKE_MODEL_ID and loaded.telegram.token is not None


@wrong_endpoints
async def test_a_wrong_endpoint_is_named_with_its_fix_and_nothing_is_written(
    tmp_path: Path,
    fake_llm: FakeLLM,
    capsys: pytest.CaptureFixture[str],
    case: str,
    fix: str,
) -> None:
    url = wrong_endpoint(fake_llm, case)
    config = existing_config(tmp_path)
    before = config.read_bytes()
    code, err = await setup(config, capsys, "--llm-base-url", url, "--model", FAKE_MODEL_ID)
    assert code == 2
    assert fix in err and "nothing written" in err and "Traceback" not in err
    assert config.read_bytes() == before


async def test_running_it_again_changes_only_the_values_it_is_given(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.models = [FAKE_MODEL_ID, "qwen3:8b"]
    config = existing_config(
        tmp_path,
        extra=(
            "\n[llm]\n# my laptop's Ollama\n"
            f'base_url = "{fake_llm.base_url}"\n'
            f'model = "{FAKE_MODEL_ID}"   # the small one\n'
            "timeout = 120\n\n[memory]\nreview_turns = 5  # fewer reviews\n"
        ),
    )
    before = config.read_text(encoding="utf-8")
    code, err = await setup(config, capsys, "--model", "qwen3:8b")
    assert code == 0, err
    after = config.read_text(encoding="utf-8")
    assert after == before.replace(f'model = "{FAKE_MODEL_ID}"', 'model = "qwen3:8b"')


async def test_the_interactive_first_run_asks_again_after_a_wrong_answer(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path, telegram)
    refused = f"http://127.0.0.1:{refused_port()}/v1"
    answers = "\n".join(
        [
            refused,  # LLM endpoint (local: no key asked) -> connection refused, asked again
            fake_llm.base_url,  # LLM endpoint
            "",  # model: keep fake-model
            "$TG_TOKEN",  # Telegram token from the environment
            "",  # Discord: skip
            "4242",  # your Telegram user id
        ]
    )
    code, err = await setup(config, capsys, answers=answers + "\n")
    assert code == 0, err
    assert "connection refused" in err and f"it serves: {FAKE_MODEL_ID}" in err
    assert f"@{BOT}" in err
    loaded = load_config(config)
    assert loaded.llm.base_url == fake_llm.base_url
    assert loaded.owner.telegram_ids == [4242]
    assert "/claim" not in err  # the owner is known: no code needed
    assert stat.S_IMODE(os.stat(config).st_mode) != 0o600  # no literal secret inside


async def test_a_pasted_token_stays_out_of_the_output_and_the_file_is_private(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path, telegram)
    answers = f"{fake_llm.base_url}\n{FAKE_MODEL_ID}\n{TOKEN}\n\n\n"
    code, err = await setup(config, capsys, answers=answers)
    assert code == 0, err
    assert TOKEN not in err and TOKEN.split(":")[1] not in err
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
    assert f"https://t.me/{BOT}?start=" in err  # no id given: a claim code


async def test_a_discord_token_is_checked_and_the_invite_url_shown(
    tmp_path: Path,
    fake_llm: FakeLLM,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DC_TOKEN", BOT_TOKEN)
    async with FakeDiscord(application_id=4321) as fake:
        restore = point_discord_at(fake)
        try:
            config = existing_config(tmp_path, extra=f'\n[discord]\napi_base = "{fake.api_base}"\n')
            code, err = await setup(
                config,
                capsys,
                "--llm-base-url", fake_llm.base_url,
                "--model", FAKE_MODEL_ID,
                "--discord-token-env", "DC_TOKEN",
            )  # fmt: skip
        finally:
            restore()
    assert code == 0, err
    assert "client_id=4321" in err and "permissions=277562330112" in err
    assert await live_claims(tmp_path, "discord") == [code_hash(claim_code(err))]


async def test_without_answers_it_stops_and_names_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.toml"
    code, err = await setup(config, capsys, answers="")
    assert code == 2
    assert "--llm-base-url" in err and "Traceback" not in err
    assert not config.exists()


async def test_a_config_that_does_not_load_is_named_before_any_question(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path, extra='\n[telegram]\ntoken = "${NOT_SET_ANYWHERE}"\n')
    before = config.read_bytes()
    code, err = await setup(config, capsys, answers=f"{fake_llm.base_url}\n{FAKE_MODEL_ID}\n")
    assert code == 2
    assert "NOT_SET_ANYWHERE" in err and "fix that first" in err
    assert "LLM endpoint" not in err
    assert config.read_bytes() == before


async def test_the_interactive_run_offers_the_web_page(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path)
    answers = [fake_llm.base_url, "", "", "", "y"]  # endpoint, model, no tokens, web: yes
    code, err = await setup(config, capsys, answers="\n".join(answers) + "\n")
    assert code == 0, err
    assert "Turn on the web page" in err and "/admin web" in err
    loaded = load_config(config)
    assert loaded.web.enabled is True
    assert loaded.web.listen == "127.0.0.1"


async def test_the_web_page_stays_off_unless_asked_for(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path)
    answers = [fake_llm.base_url, "", "", ""]  # the input ends before the web question
    code, err = await setup(config, capsys, answers="\n".join(answers) + "\n")
    assert code == 0, err
    assert load_config(config).web.enabled is False


async def test_the_non_interactive_form_turns_the_web_page_on(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path)
    code, err = await setup(
        config, capsys, "--llm-base-url", fake_llm.base_url, "--model", FAKE_MODEL_ID, "--web"
    )
    assert code == 0, err
    assert load_config(config).web.enabled is True
