"""Each mistake a newcomer makes in `companion setup` is explained, and the very next question
is the one whose answer was wrong: a wrong model asks for the model (not the endpoint), a bad
address is named before any model is asked, a refused key asks for the key. Answers are piped
in as a script would; the real wizard runs against the fakes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.model import load_config
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM
from tests.fakes.fake_telegram import FakeTelegram
from tests.first_run import new_bot  # noqa: F401 (the telegram fixture)
from tests.test_llm_check import refused_port
from tests.test_setup import environment, existing_config, setup  # noqa: F401 (a fixture)

ENDPOINT, KEY, MODEL = "LLM endpoint", "API key for", "Model"
TELEGRAM, OWNER = "Telegram bot token", "Your own Telegram user id"
PROMPTS = (ENDPOINT, KEY, f"{MODEL} [", f"{MODEL}:", TELEGRAM, "Discord bot token", OWNER)


def next_prompt(err: str, problem: str) -> str:
    """The first question asked after the line saying ``problem``."""
    start = err.index(problem) + len(problem)
    asked = [(err.find(p, start), p) for p in PROMPTS if err.find(p, start) >= 0]
    assert asked, f"no question after {problem!r}:\n{err}"
    return min(asked)[1].rstrip(" [:")


def asked_before(err: str, prompt: str, problem: str) -> bool:
    return prompt in err[: err.index(problem)]


async def run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answers: list[str], **config: object
) -> str:
    path = existing_config(tmp_path, **config)  # type: ignore[arg-type]
    code, err = await setup(path, capsys, answers="\n".join(answers) + "\n")
    assert code == 0, err
    return err


async def test_a_wrong_model_asks_for_the_model_again_not_the_endpoint(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    err = await run(tmp_path, capsys, [fake_llm.base_url, "qwen9", FAKE_MODEL_ID, "", ""])
    problem = "model 'qwen9' is not served"
    assert next_prompt(err, problem) == MODEL
    assert err.count(ENDPOINT) == 1
    assert load_config(tmp_path / "config.toml").llm.model == FAKE_MODEL_ID


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        ("localhost:11434", "is not a URL"),
        ("refused", "connection refused"),
        ("no /v1", "has no OpenAI-compatible API"),
    ],
)
async def test_a_bad_address_is_named_before_the_model_is_asked_and_asked_again(
    tmp_path: Path,
    fake_llm: FakeLLM,
    capsys: pytest.CaptureFixture[str],
    wrong: str,
    problem: str,
) -> None:
    url = {
        "refused": f"http://127.0.0.1:{refused_port()}/v1",
        "no /v1": fake_llm.base_url.removesuffix("/v1"),
    }.get(wrong, wrong)
    err = await run(tmp_path, capsys, [url, fake_llm.base_url, "", "", ""])
    assert next_prompt(err, problem) == ENDPOINT
    assert not asked_before(err, MODEL, problem)
    assert load_config(tmp_path / "config.toml").llm.base_url == fake_llm.base_url


async def test_a_refused_key_asks_for_the_key_again_not_the_address(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_llm.api_key = "sk-needed"
    answers = [fake_llm.base_url, "sk-wrong", "sk-needed", "", "", ""]
    err = await run(tmp_path, capsys, answers)
    assert next_prompt(err, "wants an API key (401)") == KEY
    assert next_prompt(err, "refused the API key (401)") == KEY
    assert err.count(ENDPOINT) == 1 and "sk-needed" not in err
    loaded = load_config(tmp_path / "config.toml").llm
    assert loaded.api_key is not None and loaded.api_key.get_secret_value() == "sk-needed"


async def test_a_rejected_telegram_token_asks_for_the_token_again(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TG_WRONG", "999:WRONG")
    answers = [fake_llm.base_url, "", "$TG_WRONG", "$TG_TOKEN", "", "4242"]
    err = await run(tmp_path, capsys, answers, telegram=telegram)
    assert next_prompt(err, "telegram.token was rejected") == TELEGRAM
    assert load_config(tmp_path / "config.toml").owner.telegram_ids == [4242]


async def test_an_owner_id_that_is_not_a_number_is_asked_again(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = [fake_llm.base_url, "", "$TG_TOKEN", "", "@me", "4242"]
    err = await run(tmp_path, capsys, answers, telegram=telegram)
    assert next_prompt(err, "'@me' is not a Telegram user id") == OWNER
    assert load_config(tmp_path / "config.toml").owner.telegram_ids == [4242]


async def test_a_self_hosted_bot_api_is_set_with_its_flag_and_the_token_checked_there(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    config = existing_config(tmp_path)  # no [telegram] yet: only the flag points at the fake
    code, err = await setup(
        config,
        capsys,
        "--llm-base-url", fake_llm.base_url,
        "--model", FAKE_MODEL_ID,
        "--telegram-token-env", "TG_TOKEN",
        "--telegram-base-url", telegram.base_url,
    )  # fmt: skip
    assert code == 0, err
    assert "@mira_home_bot" in err  # getMe answered by the server the flag names
    assert load_config(config).telegram.base_url == telegram.base_url
