"""The Discord channel end to end: real discord.py against the fake Discord REST API and
gateway and the fake LLM. Connection and intents, DMs, server channels (mention gating,
context, threads, several partners with their own names and avatars), missing permissions,
other bots, reconnects and missed messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.commands.table import COMMANDS
from tests.discord_harness import (
    ALICE,
    BOB,
    BOT_ID,
    CHANNEL,
    OWNER,
    THREAD,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    eventually,
    posts_to,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import (
    INTENT_DIRECT_MESSAGE_REACTIONS,
    INTENT_DIRECT_MESSAGES,
    INTENT_GUILD_MESSAGE_REACTIONS,
    INTENT_GUILD_MESSAGES,
    INTENT_GUILDS,
    INTENT_MESSAGE_CONTENT,
    FakeDiscord,
    RestCall,
)
from tests.fakes.fake_llm import FakeLLM, Reply

SOL_AVATAR = "https://example.org/avatars/sol.png"


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def all_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


def mention(text: str) -> str:
    return f"<@{BOT_ID}> {text}"


# ---- connection ---------------------------------------------------------------------------


async def test_identify_carries_the_documented_intents(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    gateway = await gateways.start()
    [identify] = fake.identifies
    wanted = (
        INTENT_GUILDS
        | INTENT_GUILD_MESSAGES
        | INTENT_DIRECT_MESSAGES
        | INTENT_MESSAGE_CONTENT
        | INTENT_GUILD_MESSAGE_REACTIONS
        | INTENT_DIRECT_MESSAGE_REACTIONS
    )
    assert identify["intents"] == wanted
    assert gateway.channel.connected
    assert gateway.app.gateway.bot_usernames["discord"] == "companion"


async def test_shards_auto_runs_the_auto_sharded_client(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    gateway = await gateways.start(discord={"shards": "auto"})
    assert fake.calls("GET", "/gateway/bot")  # AutoShardedClient asks for the shard count
    assert [identify["shard"] for identify in fake.identifies] == [[0, 1]]
    assert gateway.channel.connected


async def test_slash_commands_are_synced_once_with_admin_hidden_by_default(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    gateways.add_partner("sol", "Sol")
    await gateways.start()
    await fake.reconnect(wait=True)
    syncs = fake.calls("PUT", f"/applications/{fake.application_id}/commands")
    assert len(syncs) == 1  # not again on RESUME
    commands = {c["name"]: c for c in fake.commands[None]}
    user_commands = [c.name for c in COMMANDS.values() if not c.owner_only]
    assert sorted(commands) == sorted([*user_commands, "admin"])
    for command in COMMANDS.values():  # a command that takes arguments offers an option
        if command.usage and not command.owner_only and command.name != "partner":
            assert [o["name"] for o in commands[command.name]["options"]] == ["args"]
    assert str(commands["admin"]["default_member_permissions"]) == "0"
    assert commands["help"]["default_member_permissions"] is None
    [option] = commands["partner"]["options"]
    assert option["name"] == "id" and not option["required"]
    assert [(c["name"], c["value"]) for c in option["choices"]] == [
        ("Mira", "example"),
        ("Sol", "sol"),
    ]


# ---- DMs ----------------------------------------------------------------------------------


async def test_dm_message_gets_the_partners_reply(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    # slower than the gateway's typing delay, so the indicator shows
    fake_llm.script(Reply(text="Hello Alice, nice to meet you", delay_seconds=1.0))
    await fake.dm_message(user_id=ALICE, content="hi there")
    dm = fake.dm_channel_id(ALICE)
    reply = await fake.wait_for_rest(posts_to(dm), TIMEOUT)
    assert reply.json["content"] == "Hello Alice, nice to meet you"
    assert "message_reference" not in reply.json  # DMs are not quoted
    assert "hi there" in fake_llm.last_user_text()
    assert "You are Mira." in system_prompt(fake_llm.requests[0])
    assert fake.calls("POST", f"/channels/{dm}/typing")


async def test_gateway_reaches_a_user_by_user_id(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    """notify_user addresses DMs by user id; the channel opens the DM channel itself."""
    gateway = await gateways.start()
    await gateway.app.gateway.notify_user(f"discord:{BOB}", "You're in!")
    call = await fake.wait_for_rest(posts_to(fake.dm_channel_id(BOB)), TIMEOUT)
    assert call.json["content"] == "You're in!"
    assert fake.calls("POST", "/users/@me/channels")


async def test_attachment_without_text_is_answered_politely_in_a_dm(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    await fake.dm_message(
        user_id=ALICE, content="", attachments=[{"filename": "notes.zip", "data": b"PK"}]
    )
    reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(ALICE)), TIMEOUT)
    assert "can't open that kind of file" in reply.json["content"]
    assert fake_llm.requests == []


# ---- server channels ----------------------------------------------------------------------


async def test_unaddressed_chatter_is_context_for_the_next_mention(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    await fake.message_create(channel_id=CHANNEL, author_id=BOB, content="the oolong is ready")
    fake_llm.script(Reply(text="Lovely, enjoy it!"))
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("what is ready?"), mentions=[BOT_ID]
    )
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the persona's reply")
    await gateways.running[0].app.dispatcher.idle()
    [request] = fake_llm.requests  # the chatter itself was never answered
    assert "the oolong is ready" in all_text(request)
    assert "what is ready?" in fake_llm.last_user_text(request)
    [reply] = fake.webhook_messages()
    assert reply.json["content"] == "Lovely, enjoy it!"
    assert reply.json["username"] == "Mira"
    assert "avatar_url" not in reply.json  # the example partner has no avatar


async def test_a_non_owners_admin_in_a_channel_meets_the_silence_of_an_unknown_command(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    """DESIGN "Commands": a non-owner who tries /admin learns nothing. In a server channel a
    command the sender may not run is chatter (context, silence), with a mention or without,
    for an unknown command and /admin alike."""
    gateway = await gateways.start()
    unaddressed = ["/admin partners", "/nosuchcommand"]
    addressed = [f"/admin partners <@{BOT_ID}>", f"/nosuchcommand <@{BOT_ID}>"]
    sent: dict[str, str] = {}
    for text in unaddressed + addressed:
        mentions = [BOT_ID] if text in addressed else []
        message = await fake.message_create(
            channel_id=CHANNEL, author_id=BOB, content=text, mentions=mentions
        )
        sent[text] = message["id"]
    fake_llm.script(Reply(text="Hello Bob"))
    await fake.message_create(
        channel_id=CHANNEL, author_id=BOB, content=mention("hello"), mentions=[BOT_ID]
    )
    # one chat is handled in order: once this is answered, every probe before it was
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the reply to the mention")
    await gateway.app.dispatcher.idle()

    def answers(message_id: str) -> list[str]:
        return [
            c.json["content"]
            for c in fake.sent_messages(CHANNEL)
            if str((c.json.get("message_reference") or {}).get("message_id")) == message_id
        ]

    assert [answers(sent[text]) for text in unaddressed + addressed] == [[], [], [], []]
    assert fake.sent_messages(CHANNEL) == []  # the one answer came through Mira's webhook
    assert len(fake_llm.requests) == 1  # the chatter reached the model only as context


async def test_the_owners_typed_admin_runs_in_a_channel_without_a_mention(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start(bind=())
    await fake.message_create(channel_id=CHANNEL, author_id=OWNER, content="/admin bind example")
    [answer] = await fake.wait_until(
        lambda: fake.sent_messages(CHANNEL), TIMEOUT, "the owner's answer"
    )
    assert answer.json["content"].startswith("Mira now answers here.")


async def test_reply_to_the_bot_and_its_name_address_it(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="mira, are you there?")
    first = await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "a reply")
    answer = first[0].response
    await fake.message_create(
        channel_id=CHANNEL, author_id=BOB, content="and me?", referenced_message=answer
    )
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 2, TIMEOUT, "a second reply")
    assert len(fake_llm.requests) == 2


async def test_a_thread_is_its_own_session(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    await fake.message_create(
        channel_id=THREAD, author_id=ALICE, content=mention("thread secret: jasmine"),
        mentions=[BOT_ID],
    )  # fmt: skip
    [in_thread] = await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "thread reply")
    assert in_thread.query["thread_id"] == str(THREAD)  # the parent's webhook, in the thread
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("hello channel"), mentions=[BOT_ID]
    )
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 2, TIMEOUT, "channel reply")
    assert "thread_id" not in fake.webhook_messages()[1].query
    assert "jasmine" not in all_text(fake_llm.requests[1])
    thread_chat = await gateway.app.store.chat(f"discord:{CHANNEL}:{THREAD}")
    assert thread_chat is not None and thread_chat.kind == "group"
    assert len(fake.webhooks(CHANNEL)) == 1  # one persona webhook serves channel and thread


async def test_two_partners_answer_by_name_with_their_own_faces(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol", avatar=SOL_AVATAR)
    await gateways.start(bind=[(CHANNEL, "example"), (CHANNEL, "sol")])
    await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="Sol, which tea?")
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "Sol's reply")
    await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="And you, Mira?")
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 2, TIMEOUT, "Mira's reply")
    sol, mira = fake.webhook_messages()
    assert (sol.json["username"], sol.json["avatar_url"]) == ("Sol", SOL_AVATAR)
    assert mira.json["username"] == "Mira" and "avatar_url" not in mira.json
    assert "You are Sol." in system_prompt(fake_llm.requests[0])
    assert "You are Mira." in system_prompt(fake_llm.requests[1])
    # the persona messages come back over the gateway and are never taken for user messages
    assert len(fake_llm.requests) == 2


@pytest.mark.parametrize("fake", [{"manage_webhooks": False}], indirect=True)
async def test_without_manage_webhooks_replies_carry_the_name_and_the_owner_is_told_once(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start()
    owner_dm = fake.dm_channel_id(OWNER)
    for number in (1, 2):
        asked = await fake.message_create(
            channel_id=CHANNEL, author_id=ALICE, content=mention(f"question {number}"),
            mentions=[BOT_ID],
        )  # fmt: skip
        reply = await fake.wait_for_rest(
            lambda c, asked=asked: (
                posts_to(CHANNEL)(c)
                and str((c.json.get("message_reference") or {}).get("message_id")) == asked["id"]
            ),
            TIMEOUT,
        )
        assert reply.json["content"].startswith("**Mira:** ")
        assert reply.json["message_reference"]["fail_if_not_exists"] is False
    notices = fake.sent_messages(owner_dm)
    assert len(notices) == 1
    assert "Manage Webhooks" in notices[0].json["content"]
    assert "#general" in notices[0].json["content"]
    assert fake.webhook_messages() == []


async def test_a_channel_full_of_other_webhooks_gets_replies_carrying_the_name(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    for number in range(15):  # Discord's most: creating one more is refused with 30007
        fake.add_webhook(CHANNEL, f"other {number}")
    await gateways.start()
    for number in (1, 2):
        asked = await fake.message_create(
            channel_id=CHANNEL, author_id=ALICE, content=mention(f"question {number}"),
            mentions=[BOT_ID],
        )  # fmt: skip
        reply = await fake.wait_for_rest(
            lambda c, asked=asked: (
                posts_to(CHANNEL)(c)
                and str((c.json.get("message_reference") or {}).get("message_id")) == asked["id"]
            ),
            TIMEOUT,
        )
        assert reply.json["content"].startswith("**Mira:** ")
    assert fake.webhook_messages() == [] and len(fake.webhooks(CHANNEL)) == 15
    assert gateways.running[0].app.dispatcher.turns_failed == 0


async def test_messages_from_other_bots_are_ignored(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake.add_user(77, "otherbot", bot=True)
    await fake.message_create(
        channel_id=CHANNEL, author_id=77, content=mention("bot chatter"), mentions=[BOT_ID]
    )
    await fake.message_create(
        channel_id=CHANNEL, author_id=99, content=mention("hook says hi"), webhook_id=555,
        mentions=[BOT_ID],
    )  # fmt: skip
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("a human"), mentions=[BOT_ID]
    )
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the reply to the human")
    await gateways.running[0].app.dispatcher.idle()
    [request] = fake_llm.requests
    assert "bot chatter" not in all_text(request) and "hook says hi" not in all_text(request)


async def test_with_answer_bots_other_bots_are_answered_but_never_our_own_personas(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start(discord={"answer_bots": True})
    fake.add_user(77, "otherbot", bot=True)
    # the reply names the partner: were the persona's echo taken for a message, it would loop
    fake_llm.script(Reply(text="Mira here, hello fellow bot!"), Reply(text="hi Alice"))
    await fake.message_create(
        channel_id=CHANNEL, author_id=77, content=mention("hello bot"), mentions=[BOT_ID]
    )
    await fake.wait_until(lambda: fake.webhook_messages(), TIMEOUT, "the reply to the bot")
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("a human"), mentions=[BOT_ID]
    )
    await fake.wait_until(lambda: len(fake.webhook_messages()) == 2, TIMEOUT, "the second reply")
    await gateway.app.dispatcher.idle()
    assert len(fake_llm.requests) == 2
    assert "hello bot" in fake_llm.last_user_text(fake_llm.requests[0])
    assert "Mira here" not in fake_llm.last_user_text(fake_llm.requests[1])


async def test_duplicate_message_create_gets_one_reply(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    message = await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("once please"), mentions=[BOT_ID]
    )
    await fake.dispatch("MESSAGE_CREATE", message)  # Discord sends it again
    await fake.message_create(
        channel_id=CHANNEL, author_id=ALICE, content=mention("and a marker"), mentions=[BOT_ID]
    )
    await fake.wait_until(
        lambda: "and a marker" in "".join(all_text(r) for r in fake_llm.requests),
        TIMEOUT,
        "the marker to reach the model",
    )
    await gateway.app.dispatcher.idle()
    asked = [r for r in fake_llm.requests if "once please" in fake_llm.last_user_text(r)]
    assert len(asked) == 1
    assert len(fake.webhook_messages()) == len(fake_llm.requests)


async def test_health_status_file_says_discord_is_connected(
    gateways: DiscordGateways, tmp_path: Path
) -> None:
    await gateways.start()
    status_file = tmp_path / "data" / "status.json"
    await eventually(status_file.exists, "the status file")
    status = json.loads(status_file.read_text())
    assert status["channels"] == {"discord": True}
    await gateways.stop_all()
    assert not status_file.exists()


def webhook_message_ids(calls: list[RestCall]) -> list[str]:
    return [str(call.response["id"]) for call in calls]


# ---- text that UTF-8 cannot hold ---------------------------------------------------------

CAROL = 7


async def test_lone_surrogates_in_a_message_and_a_name_are_replaced_not_dropped(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    fake.add_user(CAROL, "carol\ud83d")
    fake_llm.script(Reply(text="Hello, Carol"))
    await fake.dm_message(user_id=CAROL, content="hi \ud83d there")
    reply = await fake.wait_for_rest(posts_to(fake.dm_channel_id(CAROL)), TIMEOUT)
    assert reply.json["content"] == "Hello, Carol"
    assert fake_llm.last_user_text().endswith("hi \ufffd there")
    user = await gateway.app.store.user(f"discord:{CAROL}")
    assert user is not None
    assert (user["display_name"], user["username"]) == ("carol\ufffd", "carol\ufffd")
