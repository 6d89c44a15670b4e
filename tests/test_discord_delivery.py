"""Discord delivery and faults: splitting at 2000 characters, mention safety on every send,
rate limits, streaming in DMs, reconnects mid-conversation and messages missed while away."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import discord

from tests.discord_harness import (
    ALICE,
    BOB,
    BOT_ID,
    CHANNEL,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    eventually,
    posts_to,
    snowflake_at,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import BOT_TOKEN, FakeDiscord, RestCall
from tests.fakes.fake_llm import FakeLLM, Reply


def mention(text: str) -> str:
    return f"<@{BOT_ID}> {text}"


async def ask_in_channel(fake: FakeDiscord, text: str, **kwargs: Any) -> dict[str, Any]:
    return await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention(text), mentions=[BOT_ID], **kwargs
    )


def message_sends(fake: FakeDiscord) -> list[RestCall]:
    """Every message the bot created: channel messages, webhook and interaction follow-ups."""
    return [
        c
        for c in fake.rest_calls
        if c.ok and c.method == "POST" and (c.path.endswith("/messages") or "/webhooks/" in c.path)
    ]


async def test_long_reply_is_split_and_code_fences_are_reopened(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    code = "\n".join(f"print({n})  # step {n:04d} of the long listing" for n in range(120))
    reply = f"Here is the script.\n\n```python\n{code}\n```\n\nRun it with care."
    fake_llm.script(Reply(text=reply))
    await ask_in_channel(fake, "show me the script")
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the reply")
    await gateway.app.dispatcher.idle()
    chunks = [c.json["content"] for c in fake.webhook_messages()]
    assert len(chunks) >= 3
    assert all(len(chunk) <= 2000 for chunk in chunks)
    assert all(chunk.count("```") % 2 == 0 for chunk in chunks)  # every chunk renders alone
    assert sum(chunk.startswith("```python\n") for chunk in chunks) >= 2  # reopened
    listing = "\n".join(chunks)
    assert all(f"step {n:04d}" in listing for n in range(120))
    assert chunks[0].startswith("Here is the script.") and chunks[-1].endswith("with care.")


async def test_no_send_can_ping_everyone_or_roles(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    rude = "@everyone @here <@&4242> look at this, <@6>!"
    fake_llm.responder = lambda _request: Reply(text=rude)
    await fake.dm_message(user_id=ALICE, content="say something loud")
    await ask_in_channel(fake, "and here too")
    payload = await fake.interaction(name="help", user_id=BOB)
    await fake.wait_until(lambda: len(message_sends(fake)) >= 3, TIMEOUT, "three sends")
    sends = message_sends(fake)
    for call in sends:
        allowed = call.json["allowed_mentions"]
        assert allowed["parse"] == [], call.path
        assert not allowed.get("roles") and not allowed.get("users")
    kinds = {("webhook" if "/webhooks/" in c.path else "message") for c in sends}
    assert kinds == {"webhook", "message"}
    assert any(payload["token"] in c.path for c in sends)
    assert not any(m["mention_everyone"] for m in fake.messages_in(CHANNEL))


async def test_rate_limited_send_is_retried_by_discord_py(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    gateway = await gateways.start()
    fake.fail_next("POST", "/webhooks/", status=429, retry_after=0.05)
    await ask_in_channel(fake, "are you there?")
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the reply")
    await gateway.app.dispatcher.idle()
    attempts = fake.webhook_messages(include_failed=True)
    assert [c.status for c in attempts] == [429, 200]


async def test_rate_limit_discord_py_gives_up_on_is_retried_by_the_gateway(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    """A 429 without Via reaches us as an error: the gateway waits its retry-after and retries."""
    gateway = await gateways.start()
    dm = fake.dm_channel_id(ALICE)
    fake.fail_next("POST", f"/channels/{dm}/messages", status=429, via_header=False)
    await fake.dm_message(user_id=ALICE, content="hello?")
    await fake.wait_for_rest(posts_to(dm), TIMEOUT)
    await gateway.app.dispatcher.idle()
    assert [c.status for c in fake.sent_messages(dm, include_failed=True)] == [429, 200]


async def test_streamed_dm_reply_is_one_edited_message(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(discord={"stream": True})
    text = "Let me think about that. " * 10 + "Green tea it is."
    fake_llm.script(Reply(text=text))
    await fake.dm_message(user_id=ALICE, content="which tea?")
    dm = fake.dm_channel_id(ALICE)
    await fake.wait_for_rest(posts_to(dm), TIMEOUT)
    await gateway.app.dispatcher.idle()
    [post] = fake.sent_messages(dm)
    assert fake.messages_in(dm)[-1]["content"] == text.strip()
    assert fake.messages_in(dm)[-1]["id"] == post.response["id"]
    assert fake.calls("PATCH", f"/channels/{dm}/messages/{post.response['id']}")


async def test_reconnect_mid_conversation_loses_and_doubles_nothing(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    fake_llm.script(Reply(text="first answer", delay_seconds=0.3), Reply(text="second answer"))
    await ask_in_channel(fake, "first question")
    await fake_llm.wait_for_requests(1)  # the turn is running
    await fake.reconnect()  # RECONNECT: events wait for the client's RESUME
    await ask_in_channel(fake, "second question")  # sent while the client is away
    await fake.wait_until(lambda: fake.resumed_count == 1, TIMEOUT, "the RESUME")
    await fake.wait_until(lambda: len(fake.webhook_messages()) >= 2, TIMEOUT, "both replies")
    await eventually(lambda: gateway.channel.catch_ups >= 2, "the catch-up after RESUMED")
    await gateway.app.dispatcher.idle()
    assert [c.json["content"] for c in fake.webhook_messages()] == ["first answer", "second answer"]
    assert len(fake_llm.requests) == 2
    assert len(fake.identifies) == 1 and len(fake.resumes) == 1


async def inject_while_away(fake: FakeDiscord, *messages: dict[str, Any]) -> None:
    """Post messages while the gateway is down. The fake only takes events while some client
    is identified, so a bystander client that does not receive guild messages connects."""
    bystander = discord.Client(intents=discord.Intents(guilds=True), guild_ready_timeout=0.05)
    await bystander.login(BOT_TOKEN)
    connection = asyncio.create_task(bystander.connect())
    try:
        await asyncio.wait_for(bystander.wait_until_ready(), TIMEOUT)
        for message in messages:
            await fake.message_create(**message)
    finally:
        await bystander.close()
        await asyncio.gather(connection, return_exceptions=True)


async def test_messages_missed_while_away_are_answered_once_or_kept_as_context(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    now_ms = int(time.time() * 1000)
    await gateways.start()
    await ask_in_channel(fake, "before the outage", message_id=snowflake_at(3 * 3600, now_ms))
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the first reply")
    await gateways.stop_all()

    def asked(text: str, **extra: Any) -> dict[str, Any]:
        return {"channel_id": CHANNEL, "author_id": BOB, "content": mention(text),
                "mentions": [BOT_ID], **extra}  # fmt: skip

    await inject_while_away(
        fake,
        asked("an old question", message_id=snowflake_at(2 * 3600, now_ms)),
        asked("a fresh question"),
    )
    fake_llm.script(Reply(text="answering the fresh one"))
    gateway = await gateways.start()
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 2, TIMEOUT, "the catch-up reply")
    await eventually(lambda: gateway.channel.catch_ups >= 1, "the catch-up")
    await gateway.app.dispatcher.idle()
    assert len(fake_llm.requests) == 2
    request = json.dumps(fake_llm.requests[-1]["messages"])
    assert "a fresh question" in fake_llm.last_user_text()
    assert "an old question" in request  # too old to answer: context only
    assert "an old question" not in fake_llm.last_user_text()

    await fake.reconnect(wait=True)  # fetched again after RESUMED: still answered once
    await eventually(lambda: gateway.channel.catch_ups >= 2, "the catch-up after RESUMED")
    await gateway.app.dispatcher.idle()
    assert len(fake.webhook_messages()) == 2 and len(fake_llm.requests) == 2


async def test_a_missed_command_cut_off_by_a_stop_runs_once_after_the_restart(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start()
    await gateways.stop_all()
    await inject_while_away(fake, {"channel_id": CHANNEL, "author_id": BOB, "content": "/help"})
    answer = fake.hold_next("POST", f"/channels/{CHANNEL}/messages")
    await gateways.start()
    await asyncio.wait_for(answer.arrived.wait(), TIMEOUT)  # the catch-up is answering it
    await gateways.stop_all()  # the process ends before the answer went out

    gateway = await gateways.start()
    [help_text] = await fake.wait_until(
        lambda: fake.sent_messages(CHANNEL), TIMEOUT, "the command to run again"
    )
    assert "/partner" in help_text.json["content"]
    await eventually(lambda: gateway.channel.catch_ups >= 1, "the catch-up")
    await fake.reconnect(wait=True)  # fetched once more after RESUMED: it ran, so it is skipped
    await eventually(lambda: gateway.channel.catch_ups >= 2, "the catch-up after RESUMED")
    assert len(fake.sent_messages(CHANNEL)) == 1
