"""A tool marked confirm on Discord, through the real discord.py against the fake Discord: the
question comes as the bot's message with the call shown literally and Yes and No buttons; a
press is acknowledged at once; only the person asked can answer; no answer in time means the
call is not made, and a late press is told so."""

from __future__ import annotations

from typing import Any

from bot.turn.confirmations import ASKED_BY_OTHERS, TIMED_OUT
from partners.catalog import PartnerCatalog
from tests.discord_harness import (
    ALICE,
    BOB,
    BOT_ID,
    CHANNEL,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    posts_to,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import (
    CALLBACK_DEFERRED_UPDATE,
    FLAG_EPHEMERAL,
    FakeDiscord,
    RestCall,
)
from tests.fakes.fake_llm import Reply
from tests.test_discord import mention
from tests.test_mcp_tools import call, fake_server, tool_results

ARGUMENTS = "*hi* <b> @everyone"
ESCAPED = '{"text": "\\*hi\\* \\<b\\> @everyone"}'


async def start(gateways: DiscordGateways, **mcp: Any) -> None:
    """A gateway whose partner (Mira, bound to #general) may use the test server, its echo
    marked confirm; the model calls echo, then answers "done"."""
    example = PartnerCatalog(gateways.data_dir / "partners").ensure_example()
    assert example is not None
    preset = example.dir / "preset.yml"
    preset.write_text(preset.read_text() + "tools: {mcp: [fake]}\n")
    server = fake_server(tools={"echo": {"confirm": True}})
    await gateways.start(mcp={"servers": {"fake": server}, **mcp})
    gateways.llm.script(call("fake__echo", text=ARGUMENTS), Reply("done"))


async def question_in(fake: FakeDiscord, channel_id: int) -> tuple[RestCall, dict[str, str]]:
    """The bot's question in that channel, and its buttons' custom_ids by label."""
    asked = await fake.wait_for_rest(
        lambda c: posts_to(channel_id)(c) and "Answer yes or no" in (c.json or {}).get("content"),
        TIMEOUT * 4,
    )
    [row] = asked.json["components"]
    return asked, {button["label"]: button["custom_id"] for button in row["components"]}


async def press(fake: FakeDiscord, asked: RestCall, user_id: int, custom_id: str) -> dict[str, Any]:
    """A press of one of the question's buttons, once Discord was told it was received."""
    channel_id = int(asked.response["channel_id"])
    message_id = int(asked.response["id"])
    pressed = await fake.press_button(
        channel_id=channel_id, message_id=message_id, user_id=user_id, custom_id=custom_id
    )
    acknowledged = await fake.wait_for_rest(
        lambda c: c.path.startswith(f"/interactions/{pressed['id']}/"), TIMEOUT
    )
    assert acknowledged.json["type"] == CALLBACK_DEFERRED_UPDATE  # the message stays as it is
    return pressed


async def note_to(fake: FakeDiscord, pressed: dict[str, Any]) -> RestCall:
    """The answer to a press that only the presser sees (an ephemeral follow-up)."""
    return await fake.wait_for_rest(
        lambda c: c.method == "POST" and c.path.endswith(f"/{pressed['token']}"), TIMEOUT
    )


async def test_pressing_yes_in_a_dm_runs_the_call_shown_literally(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await start(gateways)
    await fake.dm_message(user_id=ALICE, content="echo it")
    asked, buttons = await question_in(fake, fake.dm_channel_id(ALICE))
    text = asked.json["content"]
    assert text.startswith("Mira wants to use the tool fake.echo with:")
    assert ESCAPED in text  # the arguments, literally: no emphasis, no tag, no ping
    assert asked.json["allowed_mentions"]["parse"] == []
    assert list(buttons) == ["Yes", "No"]
    await press(fake, asked, ALICE, buttons["Yes"])
    done = await fake.wait_for_rest(
        lambda c: posts_to(fake.dm_channel_id(ALICE))(c) and c.json.get("content") == "done",
        TIMEOUT * 4,
    )
    assert "components" not in done.json or not done.json["components"]
    assert tool_results(gateways.llm.requests[-1])[0].endswith(ARGUMENTS)


async def test_only_the_person_asked_can_answer_in_a_channel(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await start(gateways)
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("echo it"), mentions=[BOT_ID]
    )
    asked, buttons = await question_in(fake, CHANNEL)
    assert asked.json["content"].startswith("Mira wants to use the tool fake.echo")
    bobs = await press(fake, asked, BOB, buttons["Yes"])
    note = await note_to(fake, bobs)
    assert note.json["content"] == ASKED_BY_OTHERS
    assert note.json["flags"] & FLAG_EPHEMERAL  # only Bob sees it
    assert len(gateways.llm.requests) == 1  # still waiting for Alice
    await press(fake, asked, ALICE, buttons["No"])
    await gateways.running[0].app.dispatcher.idle()
    [result] = tool_results(gateways.llm.requests[-1])
    assert "the person did not allow this call" in result


async def test_no_answer_in_time_is_no_call_and_a_late_press_is_told_so(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await start(gateways, confirm_seconds=0.5)
    await fake.dm_message(user_id=ALICE, content="echo it")
    asked, buttons = await question_in(fake, fake.dm_channel_id(ALICE))
    await fake.wait_for_rest(
        lambda c: posts_to(fake.dm_channel_id(ALICE))(c) and c.json.get("content") == "done",
        TIMEOUT * 4,
    )
    [result] = tool_results(gateways.llm.requests[-1])
    assert "the person did not confirm this call in time, so it was not made" in result
    late = await press(fake, asked, ALICE, buttons["Yes"])
    note = await note_to(fake, late)
    assert note.json["content"] == TIMED_OUT
    [kept] = await gateways.running[0].app.store.user_tool_calls("example", f"discord:{ALICE}")
    assert kept.is_error and "did not confirm" in kept.result
