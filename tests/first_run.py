"""What the first-run tests (``companion setup``, ``companion doctor``) share: the bot as a new
owner's Telegram shows it, and the ways an LLM endpoint can be wrong, each with the fix the
owner must be told."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes.fake_llm import FakeLLM
from tests.fakes.fake_telegram import FakeTelegram
from tests.test_llm_check import refused_port

BOT = "mira_home_bot"

wrong_endpoints = pytest.mark.parametrize(
    ("case", "fix"),
    [
        ("no /v1", "llm.base_url = "),
        ("unknown model", "Set llm.model to one of them"),
        ("401", "set llm.api_key"),
        ("refused", "connection refused"),
    ],
)
"""The cases of :func:`wrong_endpoint`, each with what the answer must say to fix it."""


def wrong_endpoint(fake_llm: FakeLLM, case: str) -> str:
    """An endpoint address wrong in the way ``case`` names (the fake told to be so)."""
    url = fake_llm.base_url
    if case == "no /v1":
        return url.removesuffix("/v1")
    if case == "unknown model":
        fake_llm.models = ["llama3.2:latest"]
    elif case == "401":
        fake_llm.api_key = "sk-needed"
    else:
        url = f"http://127.0.0.1:{refused_port()}/v1"
    return url


@pytest.fixture(name="telegram")
async def new_bot() -> AsyncIterator[FakeTelegram]:
    """The fake Bot API as the owner's new bot, @mira_home_bot."""
    async with FakeTelegram(bot_username=BOT) as fake:
        yield fake
