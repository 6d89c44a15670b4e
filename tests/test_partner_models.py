"""A partner's own model is one the endpoint serves: `/admin partner set ID model X` refuses a
model the endpoint does not list (answering with the list, unless --force), accepts with a note
when the endpoint keeps no list, `companion doctor` checks every partner's model by name, and
a turn that fails on a partner's model says so in the log. Real clients against the fakes."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.store.opening import open_store
from tests.admin_support import admin, say
from tests.conftest import Harness
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM
from tests.fakes.fake_telegram import TOKEN, FakeTelegram
from tests.first_run import new_bot  # noqa: F401 (the telegram fixture)


async def test_a_model_the_endpoint_does_not_serve_is_refused_with_the_served_list(
    harness: Harness,
) -> None:
    answer = await admin(harness, "/admin partner set example model qwen9")
    assert 'model "qwen9" is not served by' in answer and f"served: {FAKE_MODEL_ID}" in answer
    assert "/admin partner set example model qwen9 --force" in answer
    assert harness.app.catalog.require("example").preset.model is None


async def test_force_sets_it_anyway_and_a_served_model_needs_no_force(harness: Harness) -> None:
    answer = await admin(harness, "/admin partner set example model qwen9 --force")
    assert "model is now qwen9." in answer
    assert harness.app.catalog.require("example").preset.model == "qwen9"
    answer = await admin(harness, f"/admin partner set example model {FAKE_MODEL_ID}")
    assert f"model is now {FAKE_MODEL_ID}." in answer and "Not checked" not in answer


async def test_an_endpoint_without_a_model_list_lets_it_through_with_a_note(
    harness: Harness,
) -> None:
    harness.llm.models = None
    answer = await admin(harness, "/admin partner set example model qwen9")
    assert "model is now qwen9" in answer and "Not checked" in answer
    assert harness.app.catalog.require("example").preset.model == "qwen9"


async def test_a_turn_failing_on_the_partners_model_names_it_in_the_log(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    await admin(harness, "/admin partner set example model qwen9 --force")
    harness.llm.reject_unknown_models = True
    with caplog.at_level(logging.WARNING, logger="companion"):
        await say(harness, 5, "hello", "never sent")
    failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert any("partner example, model qwen9" in line for line in failed), failed
    assert any("check the partner's model" in line for line in failed), failed
    assert not any("check llm.model" in line for line in failed), failed


def write_config(tmp_path: Path, llm: str, body: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f'[llm]\nbase_url = "{llm}"\nmodel = "{FAKE_MODEL_ID}"\n'
        f'[storage]\ndata_dir = "{tmp_path / "data"}"\n{body}',
        encoding="utf-8",
    )
    return path


def partner_with_model(tmp_path: Path, partner_id: str, model: str) -> None:
    directory = tmp_path / "data" / "partners" / partner_id
    directory.mkdir(parents=True)
    (directory / "preset.yml").write_text(f"name: Luna\nmodel: {model}\n", encoding="utf-8")


async def doctor(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["--config", str(config), "doctor"])
    return code, capsys.readouterr().out.splitlines()


async def test_doctor_names_each_partner_whose_model_is_not_served(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    partner_with_model(tmp_path, "luna", "x")
    partner_with_model(tmp_path, "sol", FAKE_MODEL_ID)
    code, lines = await doctor(write_config(tmp_path, fake_llm.base_url), capsys)
    assert code == 1
    [bad] = [line for line in lines if line.startswith("BAD")]
    assert f'partner luna: model "x" is not served by {fake_llm.base_url}' in bad
    assert f"served: {FAKE_MODEL_ID}" in bad
    assert f'ok  partner sol: model "{FAKE_MODEL_ID}" is served' in lines


async def test_doctor_right_after_setup_says_the_claim_is_waiting_not_bad(
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
    store = await open_store(tmp_path / "data" / "gateway.db")
    await store.add_claim_code("hash", "telegram", 600)  # what setup leaves behind
    await store.close()
    code, lines = await doctor(config, capsys)
    assert code == 0, lines
    assert not [line for line in lines if line.startswith("BAD")]
    [waiting] = [line for line in lines if "claim code is waiting" in line]
    assert "/claim" in waiting and " run`" in waiting
