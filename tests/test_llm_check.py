"""Checking an LLM endpoint before the first message: the real openai client against the fake
endpoint, wrong in each way a first run gets it wrong. Every problem is one line that names the
setting to change and what to put there."""

from __future__ import annotations

import socket
from typing import Any

from bot.config.services import LLMConfig
from bot.services.llm_check import check_endpoint, is_local_endpoint
from tests.fakes.fake_llm import FAKE_MODEL_ID, FakeLLM


def llm_config(base_url: str, **values: Any) -> LLMConfig:
    return LLMConfig.model_validate({"base_url": base_url, "model": FAKE_MODEL_ID, **values})


def refused_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_working_endpoint_lists_its_models_and_answers_one_tiny_call(
    fake_llm: FakeLLM,
) -> None:
    result = await check_endpoint(llm_config(fake_llm.base_url))
    assert result.problem is None
    assert result.models == (FAKE_MODEL_ID,)
    assert len(fake_llm.requests) == 1


async def test_a_base_url_without_v1_says_to_add_it(fake_llm: FakeLLM) -> None:
    bare = fake_llm.base_url.removesuffix("/v1")
    result = await check_endpoint(llm_config(bare))
    assert result.problem is not None and "\n" not in result.problem
    assert "/v1" in result.problem and f'llm.base_url = "{bare}/v1"' in result.problem


async def test_an_unknown_model_is_named_with_the_ones_the_endpoint_has(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.models = [FAKE_MODEL_ID, "llama3.2:latest"]
    result = await check_endpoint(llm_config(fake_llm.base_url, model="qwen3"))
    assert result.problem is not None
    assert "'qwen3'" in result.problem and "llm.model" in result.problem
    assert FAKE_MODEL_ID in result.problem and "llama3.2:latest" in result.problem
    assert fake_llm.requests == []  # no call spent on a model that is not there


async def test_ollama_style_latest_tags_match_the_bare_name(fake_llm: FakeLLM) -> None:
    fake_llm.models = ["llama3.2:latest"]
    result = await check_endpoint(llm_config(fake_llm.base_url, model="llama3.2"))
    assert result.problem is None


async def test_an_unknown_model_on_an_endpoint_without_a_list_is_found_by_the_call(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.models = None
    fake_llm.reject_unknown_models = True
    result = await check_endpoint(llm_config(fake_llm.base_url, model="qwen3"))
    assert result.problem is not None
    assert "'qwen3'" in result.problem and "llm.model" in result.problem


async def test_a_401_without_a_key_asks_for_one(fake_llm: FakeLLM) -> None:
    fake_llm.api_key = "sk-right"
    result = await check_endpoint(llm_config(fake_llm.base_url))
    assert result.problem is not None
    assert "401" in result.problem and "llm.api_key" in result.problem
    assert "OPENAI_API_KEY" in result.problem


async def test_a_401_with_a_key_says_the_key_is_wrong(fake_llm: FakeLLM) -> None:
    fake_llm.api_key = "sk-right"
    result = await check_endpoint(llm_config(fake_llm.base_url, api_key="sk-wrong"))
    assert result.problem is not None
    assert "refused the API key" in result.problem and "sk-wrong" not in result.problem
    assert (await check_endpoint(llm_config(fake_llm.base_url, api_key="sk-right"))).problem is None


async def test_a_refused_port_says_nothing_listens_there() -> None:
    url = f"http://127.0.0.1:{refused_port()}/v1"
    result = await check_endpoint(llm_config(url))
    assert result.problem is not None
    assert url in result.problem and "connection refused" in result.problem
    assert "llm.base_url" in result.problem


def test_local_endpoints_are_loopback_private_or_single_label_hosts() -> None:
    for url in (
        "http://127.0.0.1:11434/v1",
        "http://localhost:8000/v1",
        "http://192.168.1.20:11434/v1",
        "http://10.0.0.5/v1",
        "http://[::1]:8000/v1",
        "http://ollama:11434/v1",
    ):
        assert is_local_endpoint(url), url
    for url in ("https://api.openai.com/v1", "https://api.deepseek.com", "http://8.8.8.8/v1"):
        assert not is_local_endpoint(url), url
