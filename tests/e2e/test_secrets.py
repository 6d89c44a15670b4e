"""Tokens and keys never reach the output: the gateway at DEBUG level through failures that log
their causes (the LLM refusing the key or failing, Telegram refusing the token, failing or
answering garbage), and ``companion doctor``, which must say a secret is set without showing it.
"""

from __future__ import annotations

import asyncio

from tests.e2e.conftest import LLM_KEY, SECRETS, TELEGRAM_TOKEN, World, assert_no_secrets
from tests.e2e.gateway_process import COMPANION, ROOT
from tests.fakes.fake_llm import Failure

DISCORD_TOKEN = "MTE4.E2E-SECRET-discord-token.xyz"
WEBHOOK_SECRET = "E2E-SECRET-webhook-secret"
TIMEOUT_SECONDS = 60.0


async def test_no_secret_reaches_the_log_even_at_debug_level_through_failures(
    world: World,
) -> None:
    gateway = await world.start(options=("-vv",))
    world.llm.script(Failure(401, "Incorrect API key provided"), Failure(500, "upstream broke"))
    for chat in (301, 302):
        world.send(chat, "hello?")
        await world.telegram.wait_for_sent(chat_id=chat, timeout=TIMEOUT_SECONDS)
    world.telegram.fail_next("sendMessage", status=401, description="Unauthorized")
    world.telegram.fail_next("getUpdates", status=502)
    world.telegram.garble_next("getUpdates")
    world.send(303, "and now?")
    await gateway.wait_for_line("getUpdates failed (Invalid server response)", TIMEOUT_SECONDS)
    await gateway.wait_for_line("not delivered", TIMEOUT_SECONDS)
    assert any(" DEBUG " in line for line in gateway.lines), "not at debug level"
    assert await gateway.terminate() == 0
    assert_no_secrets(gateway.output)


async def test_doctor_says_every_secret_is_set_and_shows_none(world: World) -> None:
    config = world.config(
        telegram={"webhook_secret": WEBHOOK_SECRET},
        discord={"token": DISCORD_TOKEN, "api_base": "http://127.0.0.1:9/api/v10"},
    )
    process = await asyncio.create_subprocess_exec(
        *COMPANION, "--config", str(config), "-vv", "doctor",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), TIMEOUT_SECONDS)
    text = out.decode()
    assert "telegram.token: set (hidden)" in text and "discord.token: set (hidden)" in text
    assert "llm.api_key: set (hidden)" in text
    for secret in (*SECRETS, LLM_KEY, TELEGRAM_TOKEN, DISCORD_TOKEN, WEBHOOK_SECRET):
        assert secret not in text, secret
