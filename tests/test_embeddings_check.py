"""Checking the ``[embeddings]`` endpoint before search needs it: the real openai client
against the fake's ``/v1/embeddings``, wrong in each way a first run gets it wrong, and
``companion doctor`` showing it. Every problem is one line that names the setting and the fix."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from bot.config.services import EmbeddingsConfig, LLMConfig
from bot.services.embeddings_check import TEST_INPUT, check_embeddings
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM
from tests.test_doctor import bad, doctor, no_openai_key, write_config  # noqa: F401
from tests.test_llm_check import refused_port

EMBEDDING_MODEL = "nomic-embed-text"


async def check(url: str, llm_url: str = "http://127.0.0.1:1/v1", **values: Any) -> str | None:
    config = EmbeddingsConfig.model_validate({"base_url": url, "model": EMBEDDING_MODEL, **values})
    llm = LLMConfig.model_validate({"base_url": llm_url, "model": FAKE_MODEL_ID})
    return await check_embeddings(config, llm)


async def test_a_working_endpoint_embeds_one_word(fake_llm: FakeLLM) -> None:
    assert await check(fake_llm.base_url) is None
    assert fake_llm.embedding_requests[-1]["model"] == EMBEDDING_MODEL


async def test_a_base_url_without_v1_says_to_add_it(fake_llm: FakeLLM) -> None:
    bare = fake_llm.base_url.removesuffix("/v1")
    problem = await check(bare)
    assert problem is not None and "\n" not in problem
    assert f'embeddings.base_url = "{bare}/v1"' in problem


async def test_a_path_with_no_api_behind_it_says_what_base_url_should_be(
    fake_llm: FakeLLM,
) -> None:
    problem = await check(f"{fake_llm.base_url}/nothing")
    assert problem is not None and "/embeddings does not exist (404)" in problem
    assert "embeddings.base_url" in problem and "/v1" in problem


async def test_an_unknown_model_is_named_with_the_ones_the_endpoint_has(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.models = [FAKE_MODEL_ID, "bge-m3:latest"]
    fake_llm.reject_unknown_models = True
    problem = await check(fake_llm.base_url)
    assert problem is not None
    assert f"{EMBEDDING_MODEL!r} is not served" in problem and "embeddings.model" in problem
    assert "bge-m3:latest" in problem and f"ollama pull {EMBEDDING_MODEL}" in problem


async def test_a_401_without_a_key_asks_for_one(fake_llm: FakeLLM) -> None:
    fake_llm.api_key = "sk-right"
    problem = await check(fake_llm.base_url)
    assert problem is not None
    assert "401" in problem and "set embeddings.api_key" in problem


async def test_a_401_with_a_key_says_the_key_is_wrong_without_showing_it(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.api_key = "sk-right"
    problem = await check(fake_llm.base_url, api_key="sk-wrong")
    assert problem is not None
    assert "refused the API key" in problem and "embeddings.api_key" in problem
    assert "sk-wrong" not in problem
    assert await check(fake_llm.base_url, api_key="sk-right") is None


async def test_on_the_llm_endpoint_the_llm_key_is_used(fake_llm: FakeLLM) -> None:
    fake_llm.api_key = "sk-right"
    url = fake_llm.base_url
    config = EmbeddingsConfig(base_url=url, model=EMBEDDING_MODEL)
    right = LLMConfig.model_validate({"base_url": url, "model": "m", "api_key": "sk-right"})
    assert await check_embeddings(config, right) is None
    wrong = LLMConfig.model_validate({"base_url": url, "model": "m", "api_key": "sk-wrong"})
    problem = await check_embeddings(config, wrong)
    assert problem is not None and "llm.api_key" in problem and "sk-wrong" not in problem


async def test_a_refused_port_says_nothing_listens_there() -> None:
    url = f"http://127.0.0.1:{refused_port()}/v1"
    problem = await check(url)
    assert problem is not None
    assert url in problem and "connection refused" in problem
    assert "embeddings.base_url" in problem


@pytest.mark.parametrize(
    "answer",
    ["AACAPwAAAEA=", ["a", "b"], [[1.0], [2.0, 3.0]], [math.nan, 1.0], [0.0, 0.0]],
    ids=["base64", "strings", "nested lists", "NaN", "zeros"],
)
async def test_an_answer_that_is_no_vector_says_so(fake_llm: FakeLLM, answer: Any) -> None:
    """What the embedder would skip, doctor names before the first message is stored."""
    fake_llm.embedding_answers[TEST_INPUT] = answer
    problem = await check(fake_llm.base_url)
    assert problem is not None and "not a usable embedding" in problem
    assert "embeddings.model" in problem


async def test_an_answer_without_a_vector_for_the_word_says_so(fake_llm: FakeLLM) -> None:
    fake_llm.embedding_rewrite = lambda body: {**body, "data": []}
    problem = await check(fake_llm.base_url)
    assert problem is not None and "not an embedding" in problem


@pytest.mark.parametrize(
    "body", [b'{"data": [', b"[" * 100_000 + b"]" * 100_000], ids=["cut off", "nested too deep"]
)
async def test_a_body_that_is_no_json_says_it_is_not_an_embedding(
    fake_llm: FakeLLM, body: bytes
) -> None:
    fake_llm.embedding_rewrite = lambda _: body
    problem = await check(fake_llm.base_url)
    assert problem is not None and "not an embedding" in problem


async def test_doctor_checks_the_embeddings_endpoint_when_it_is_set(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = await doctor(write_config(tmp_path, fake_llm.base_url), capsys)
    assert code == 0 and not any("embeddings" in line for line in lines)  # off: not checked
    section = f'[embeddings]\nbase_url = "{fake_llm.base_url}"\nmodel = "{EMBEDDING_MODEL}"\n'
    code, lines = await doctor(write_config(tmp_path, fake_llm.base_url, section), capsys)
    assert code == 0, lines
    assert (
        f"ok  embeddings endpoint {fake_llm.base_url} embeds with model {EMBEDDING_MODEL}" in lines
    )
    down = f"http://127.0.0.1:{refused_port()}/v1"
    section = f'[embeddings]\nbase_url = "{down}"\nmodel = "{EMBEDDING_MODEL}"\n'
    code, lines = await doctor(write_config(tmp_path, fake_llm.base_url, section), capsys)
    assert code == 1
    [line] = bad(lines)
    assert "embeddings endpoint" in line and "connection refused" in line
