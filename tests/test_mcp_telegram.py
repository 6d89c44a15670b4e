"""A tool marked confirm on Telegram, through the real python-telegram-bot against the fake Bot
API: the question comes with Yes and No buttons, and pressing Yes runs the call."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from partners.catalog import PartnerCatalog
from tests.fakes.fake_llm import Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    BOT_USERNAME,
    TelegramGateways,
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)
from tests.test_mcp_tools import call, fake_server, tool_results

ALICE = 502


@pytest.fixture
async def fake() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(bot_username=BOT_USERNAME) as tg:
        yield tg


async def test_pressing_yes_on_the_question_runs_the_call(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    example = PartnerCatalog(gateways.data_dir / "partners").ensure_example()
    assert example is not None
    preset = example.dir / "preset.yml"
    preset.write_text(preset.read_text() + "tools: {mcp: [fake]}\n")
    server = fake_server(tools={"echo": {"confirm": True}})
    await gateways.start(mcp={"servers": {"fake": server}})
    gateways.llm.script(call("fake__echo", text="pressed"), Reply("done"))
    fake.send_user_message(chat_id=ALICE, user_id=ALICE, text="echo it")
    [question] = await fake.wait_for_sent(lambda c: "Answer yes or no" in (c.text or ""))
    assert "wants to use the tool fake.echo with:" in (question.text or "")
    yes, no = (row[0] for row in question.params["reply_markup"]["inline_keyboard"])
    assert (yes["text"], no["text"]) == ("Yes", "No")
    fake.push_update(
        fake.callback_query_update(
            chat_id=ALICE,
            user_id=ALICE,
            data=yes["callback_data"],
            message_id=question.result["message_id"],
        )
    )
    await fake.wait_for_sent(lambda c: c.text == "done", chat_id=ALICE)
    assert tool_results(gateways.llm.requests[-1])[0].endswith("pressed")
