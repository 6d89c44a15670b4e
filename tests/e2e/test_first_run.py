"""The first hour, as a new owner lives it: `companion run` with a bot token and no owner prints
a claim code and the Telegram deep link; pressing Start makes you the owner. A stranger who
writes before anyone owns the bot appears on the terminal, and `companion pairing approve`,
typed in another shell beside the running gateway, lets them in and tells them so."""

from __future__ import annotations

import asyncio
import re

from tests.e2e.conftest import BOT_USERNAME, World, assert_no_secrets
from tests.e2e.gateway_process import COMPANION, ROOT

NEW_OWNER = 777
STRANGER = 888
TIMEOUT_SECONDS = 60.0


async def reply_to(world: World, chat_id: int, text: str) -> str:
    before = len(world.replies(chat_id))
    world.send(chat_id, text)
    sent = await world.telegram.wait_for_sent(
        chat_id=chat_id, count=before + 1, timeout=TIMEOUT_SECONDS
    )
    return sent[before].text or ""


async def test_the_deep_link_run_prints_makes_the_first_one_to_press_start_the_owner(
    world: World,
) -> None:
    gateway = await world.start(world.config(owner={"telegram_ids": []}))
    link = await gateway.wait_for_line(f"https://t.me/{BOT_USERNAME}?start=", TIMEOUT_SECONDS)
    code = re.search(r"\?start=([A-Z0-9]+)", link)
    assert code is not None
    assert any(f"/claim {code[1]}" in line for line in gateway.lines)

    assert "You're the owner" in await reply_to(world, NEW_OWNER, f"/start {code[1]}")
    assert "Mira (example)" in await reply_to(world, NEW_OWNER, "/admin partners")
    assert "You're the owner" not in await reply_to(world, STRANGER, f"/start {code[1]}")
    assert gateway.errors() == []
    assert_no_secrets(gateway.output)


async def test_a_stranger_approved_from_another_shell_is_told_and_let_in(world: World) -> None:
    config = world.config(owner={"telegram_ids": []}, access={"dm_policy": "pairing"})
    gateway = await world.start(config)
    assert "private" in await reply_to(world, STRANGER, "hello?")
    line = await gateway.wait_for_line("companion pairing approve ", TIMEOUT_SECONDS)
    code = line.split("companion pairing approve ")[1].strip()
    assert any("PAIRING REQUEST" in line for line in gateway.lines)

    process = await asyncio.create_subprocess_exec(
        *COMPANION, "--config", str(config), "pairing", "approve", code,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=ROOT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), TIMEOUT_SECONDS)
    assert process.returncode == 0, out.decode()

    welcome = await world.telegram.wait_for_sent(chat_id=STRANGER, count=2, timeout=TIMEOUT_SECONDS)
    assert welcome[1].text == "You're in! The owner approved you. Say hello."
    tag = world.tag()
    world.send(STRANGER, f"thank you #{tag}")
    assert (await world.wait_for_reply(tag)).endswith(f"#{tag}")
    assert gateway.errors() == []
