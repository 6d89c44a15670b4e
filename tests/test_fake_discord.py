"""Tests for the fake Discord server (tests/fakes/fake_discord.py), driven by real discord.py.

Every test runs the real ``discord.Client`` (and ``app_commands.CommandTree``) against the fake
on 127.0.0.1, so these tests also pin down the discord.py behaviour the adapter relies on.
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import discord
import pytest
from discord import app_commands

from tests.fakes.fake_discord import BOT_TOKEN, FakeDiscord, RestCall, point_discord_at

GUILD = 10
CHANNEL = 20
THREAD = 30
ALICE = 5
BOB = 6
TIMEOUT = 5.0

MessageHook = Callable[[discord.Message], Awaitable[None]]


def content_intents() -> discord.Intents:
    intents = discord.Intents.default()
    intents.message_content = True
    return intents


class RecordingClient(discord.Client):
    """A discord.Client that records messages and errors and can run a hook per user message."""

    def __init__(self, *, intents: discord.Intents | None = None, **options: Any) -> None:
        super().__init__(intents=intents or content_intents(), guild_ready_timeout=0.05, **options)
        self.received: list[discord.Message] = []
        self.errors: list[BaseException] = []
        self.hook: MessageHook | None = None
        self.resumed = asyncio.Event()
        self.ready_count = 0
        self.identify_initial: list[bool] = []
        self._new_message = asyncio.Event()

    async def before_identify_hook(self, _shard_id: int | None, *, initial: bool = False) -> None:
        # discord.Client sleeps 5 s before every non-initial IDENTIFY; tests skip that wait.
        self.identify_initial.append(initial)

    async def on_ready(self) -> None:
        self.ready_count += 1

    async def on_resumed(self) -> None:
        self.resumed.set()

    async def on_message(self, message: discord.Message) -> None:
        self.received.append(message)
        self._new_message.set()
        own = self.user is not None and message.author.id == self.user.id
        if self.hook is not None and not own and message.webhook_id is None:
            await self.hook(message)

    async def on_error(self, _event_method: str, /, *_args: Any, **_kwargs: Any) -> None:
        error = sys.exc_info()[1]
        if error is not None:
            self.errors.append(error)

    async def wait_message(
        self, predicate: Callable[[discord.Message], bool], what: str = "message"
    ) -> discord.Message:
        try:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    found = next((m for m in self.received if predicate(m)), None)
                    if found is not None:
                        return found
                    self._new_message.clear()
                    await self._new_message.wait()
        except TimeoutError:
            seen = [(m.author.id, m.content) for m in self.received]
            raise AssertionError(f"no {what} reached on_message; received {seen}") from None


class ShardRecordingClient(RecordingClient, discord.AutoShardedClient):
    """A RecordingClient that connects the shards it is given (all of the count Discord
    recommends without them), as a worker does."""

    def __init__(self, shard_ids: list[int] | None = None, shard_count: int | None = None) -> None:
        super().__init__(shard_ids=shard_ids, shard_count=shard_count)


def make_tree(client: RecordingClient) -> app_commands.CommandTree[RecordingClient]:
    tree: app_commands.CommandTree[RecordingClient] = app_commands.CommandTree(client)

    @tree.error
    async def record_error(
        _interaction: discord.Interaction[RecordingClient], error: app_commands.AppCommandError
    ) -> None:
        client.errors.append(error)

    return tree


@asynccontextmanager
async def running(client: RecordingClient) -> AsyncIterator[RecordingClient]:
    """login + connect, wait for on_ready (or the connect error), always close cleanly."""
    await client.login(BOT_TOKEN)
    connect = asyncio.create_task(client.connect())
    ready = asyncio.create_task(client.wait_until_ready())
    try:
        done, _ = await asyncio.wait(
            {connect, ready}, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if connect in done:
            connect.result()  # raises the connect error
            raise AssertionError("client.connect() returned before the client was ready")
        if ready not in done:
            raise AssertionError("client did not become ready")
        yield client
    finally:
        ready.cancel()
        await client.close()
        await asyncio.wait_for(asyncio.gather(connect, return_exceptions=True), TIMEOUT)
    assert client.errors == []


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        server.add_guild(GUILD, "Test Guild")
        server.add_text_channel(GUILD, CHANNEL, "general")
        server.add_thread(GUILD, CHANNEL, THREAD, "persona-thread")
        server.add_user(ALICE, "alice")
        server.add_user(BOB, "bob")
        restore = point_discord_at(server)
        try:
            yield server
        finally:
            restore()


def is_channel_post(channel_id: int) -> Callable[[RestCall], bool]:
    return lambda c: c.method == "POST" and c.path == f"/channels/{channel_id}/messages"


def text_channel(client: discord.Client, channel_id: int = CHANNEL) -> discord.TextChannel:
    channel = client.get_channel(channel_id)
    assert isinstance(channel, discord.TextChannel)
    return channel


# --------------------------------------------------------------------------- connection


async def test_ready_records_identify_with_the_clients_intents(fake: FakeDiscord) -> None:
    intents = content_intents()
    async with running(RecordingClient(intents=intents)) as client:
        assert client.user is not None
        assert (client.user.id, client.user.name) == (fake.bot_id, fake.bot_name)
        assert client.application_id == fake.application_id
        assert client.ready_count == 1
    assert len(fake.identifies) == 1
    assert fake.identifies[0]["intents"] == intents.value
    assert fake.identifies[0]["token"] == BOT_TOKEN
    login_calls = [
        c for c in fake.rest_calls if c.path in ("/users/@me", "/oauth2/applications/@me")
    ]
    assert [c.path for c in login_calls] == ["/users/@me", "/oauth2/applications/@me"]
    assert all(c.header("Authorization") == f"Bot {BOT_TOKEN}" for c in login_calls)
    assert fake.heartbeats >= 1


async def test_guild_channel_and_thread_are_cached(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        channel = text_channel(client)
        assert channel.name == "general"
        assert channel.guild.id == GUILD
        assert channel.guild.name == "Test Guild"
        thread = client.get_channel(THREAD)
        assert isinstance(thread, discord.Thread)
        assert thread.parent_id == CHANNEL
        assert thread.parent is channel
        assert thread.name == "persona-thread"
        me = channel.guild.me
        assert me is not None and me.id == fake.bot_id
        perms = channel.permissions_for(me)
        assert perms.manage_webhooks and perms.send_messages and not perms.administrator


async def test_member_list_follows_the_members_intent(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        guild = client.get_guild(GUILD)
        assert guild is not None
        assert [m.id for m in guild.members] == [fake.bot_id]  # no GUILD_MEMBERS intent
        assert guild.member_count == 4  # bot, owner, alice, bob

    intents = content_intents()
    intents.members = True
    sharded = discord.AutoShardedClient(intents=intents, guild_ready_timeout=0.05)
    await sharded.login(BOT_TOKEN)
    connect = asyncio.create_task(sharded.connect())
    try:
        await asyncio.wait_for(sharded.wait_until_ready(), TIMEOUT)
        guild = sharded.get_guild(GUILD)
        assert guild is not None and guild.chunked
        assert {m.id for m in guild.members} == {fake.bot_id, fake.owner_id, ALICE, BOB}
    finally:
        await sharded.close()
        await asyncio.wait_for(asyncio.gather(connect, return_exceptions=True), TIMEOUT)
    # AutoShardedClient asks /gateway/bot for the shard count; a plain Client does not.
    assert len(fake.calls("GET", "/gateway/bot")) == 1
    assert fake.identifies[-1]["shard"] == [0, 1]


SHARD_ONE_GUILD = 1 << 22
"""A guild Discord routes to shard 1 of 2: (guild_id >> 22) % 2 == 1 (GUILD is on shard 0)."""
SHARD_ONE_CHANNEL = 40


async def test_each_shard_gets_only_the_guilds_and_events_discord_routes_to_it(
    fake: FakeDiscord,
) -> None:
    fake.add_guild(SHARD_ONE_GUILD, "Second Guild")
    fake.add_text_channel(SHARD_ONE_GUILD, SHARD_ONE_CHANNEL, "second")
    async with (
        running(ShardRecordingClient([0], 2)) as zero,
        running(ShardRecordingClient([1], 2)) as one,
    ):
        assert [guild.id for guild in zero.guilds] == [GUILD]
        assert [guild.id for guild in one.guilds] == [SHARD_ONE_GUILD]
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="for shard 0")
        await fake.message_create(channel_id=SHARD_ONE_CHANNEL, author_id=ALICE, content="for 1")
        await fake.dm_message(user_id=ALICE, content="a DM")  # DMs go to shard 0 only
        await fake.message_create(channel_id=SHARD_ONE_CHANNEL, author_id=BOB, content="last")
        await zero.wait_message(lambda m: m.content == "a DM")
        await one.wait_message(lambda m: m.content == "last")
        # each session gets its events in order: what came before "last" is all shard 1 got
        assert [m.content for m in zero.received] == ["for shard 0", "a DM"]
        assert [m.content for m in one.received] == ["for 1", "last"]
    assert sorted(identify["shard"] for identify in fake.identifies) == [[0, 2], [1, 2]]
    assert not fake.calls("GET", "/gateway/bot")  # a client given its count does not ask


async def test_gateway_bot_recommends_the_shard_count_it_is_given(fake: FakeDiscord) -> None:
    fake.recommended_shards = 2
    async with running(ShardRecordingClient()) as sharded:
        assert sharded.shard_count == 2
    assert sorted(identify["shard"] for identify in fake.identifies) == [[0, 2], [1, 2]]


async def test_privileged_intent_not_allowed_closes_with_4014(fake: FakeDiscord) -> None:
    fake.allowed_privileged_intents = 0
    with pytest.raises(discord.PrivilegedIntentsRequired):
        async with running(RecordingClient(intents=content_intents())):
            pass


async def test_wrong_token_fails_login(fake: FakeDiscord) -> None:
    client = discord.Client(intents=content_intents())
    try:
        with pytest.raises(discord.LoginFailure):
            await client.login("not-the-token")
    finally:
        await client.close()
    assert fake.rest_calls[-1].status == 401


# --------------------------------------------------------------------------- messages


async def test_message_reaches_on_message_and_reply_is_recorded(fake: FakeDiscord) -> None:
    client = RecordingClient()
    replies: list[discord.Message] = []

    async def reply(message: discord.Message) -> None:
        quiet = discord.AllowedMentions.none()
        replies.append(
            await message.channel.send(f"hi {message.author.mention}", allowed_mentions=quiet)
        )

    client.hook = reply
    async with running(client):
        sent = await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="hello")
        message = await client.wait_message(lambda m: m.content == "hello")
        assert message.id == int(sent["id"])
        assert isinstance(message.author, discord.Member)
        assert (message.author.id, message.author.name) == (ALICE, "alice")
        assert message.guild is not None and message.guild.id == GUILD
        assert message.channel.id == CHANNEL

        call = await fake.wait_for_rest(is_channel_post(CHANNEL))
        assert call.json["content"] == f"hi <@{ALICE}>"
        assert call.json["allowed_mentions"] == {"parse": []}
        # Discord echoes the bot's own message over the gateway.
        echo = await client.wait_message(lambda m: m.author.id == fake.bot_id, "echo")
        assert echo.content == f"hi <@{ALICE}>"
        assert replies and replies[0].id == echo.id
        assert [c.json["content"] for c in fake.sent_messages(CHANNEL)] == [f"hi <@{ALICE}>"]
        assert fake.messages_in(CHANNEL)[-1]["mentions"][0]["id"] == str(ALICE)

        await fake.message_create(channel_id=THREAD, author_id=BOB, content="in the thread")
        in_thread = await client.wait_message(lambda m: m.content == "in the thread")
        assert isinstance(in_thread.channel, discord.Thread)
        assert in_thread.channel.parent_id == CHANNEL
        await fake.wait_for_rest(is_channel_post(THREAD))


async def test_without_message_content_intent_guild_content_is_blank(fake: FakeDiscord) -> None:
    client = RecordingClient(intents=discord.Intents.default())
    async with running(client):
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="secret")
        await fake.message_create(
            channel_id=CHANNEL,
            author_id=ALICE,
            content=f"<@{fake.bot_id}> are you there?",
            mentions=[fake.bot_id],
        )
        await fake.dm_message(user_id=BOB, content="dm text")
        await client.wait_message(lambda m: m.author.id == BOB)
    by_author = [(m.author.id, m.content) for m in client.received]
    assert by_author == [
        (ALICE, ""),
        (ALICE, f"<@{fake.bot_id}> are you there?"),
        (BOB, "dm text"),
    ]
    assert fake.messages_in(CHANNEL)[0]["content"] == "secret"


async def test_dm_message_arrives_in_a_dm_channel(fake: FakeDiscord) -> None:
    client = RecordingClient()

    async def answer(message: discord.Message) -> None:
        await message.channel.send("dm reply")

    client.hook = answer
    async with running(client):
        sent = await fake.dm_message(user_id=ALICE, content="psst")
        message = await client.wait_message(lambda m: m.content == "psst")
        assert isinstance(message.channel, discord.DMChannel)
        assert message.guild is None
        assert message.author.id == ALICE
        dm_id = fake.dm_channel_id(ALICE)
        assert "guild_id" not in sent and sent["channel_id"] == str(dm_id)
        call = await fake.wait_for_rest(is_channel_post(dm_id))
        assert call.json["content"] == "dm reply"

        user = await client.fetch_user(ALICE)
        dm = await user.create_dm()
        assert dm.id == dm_id


async def test_reply_files_and_attachment_download(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        sent = await fake.message_create(
            channel_id=CHANNEL,
            author_id=ALICE,
            content="look",
            attachments=[{"filename": "cat.png", "data": b"\x89PNG fake"}],
        )
        incoming = await client.wait_message(lambda m: m.content == "look")
        assert incoming.attachments[0].filename == "cat.png"
        assert incoming.attachments[0].url.startswith(fake.cdn_base)
        assert await incoming.attachments[0].read() == b"\x89PNG fake"

        note = discord.File(io.BytesIO(b"note body"), filename="note.txt")
        reply = await incoming.reply("with file", file=note)
        call = fake.sent_messages(CHANNEL)[-1]
        assert call.files == [("note.txt", b"note body")]
        assert call.json["message_reference"]["message_id"] == int(sent["id"])
        assert reply.reference is not None and reply.reference.message_id == incoming.id
        assert await reply.attachments[0].read() == b"note body"
        # Replies ping the replied-to author by default: the fake lists them in mentions.
        assert [m.id for m in reply.mentions] == [ALICE]

        with pytest.raises(discord.HTTPException) as unknown:
            await text_channel(client).send(
                "to nowhere", reference=discord.MessageReference(message_id=1, channel_id=CHANNEL)
            )
        assert unknown.value.code == 50035
        with pytest.raises(discord.HTTPException) as too_long:
            await text_channel(client).send("x" * 2001)
        assert too_long.value.code == 50035


async def test_history_edit_and_delete(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        channel = text_channel(client)
        first = await channel.send("one")
        second = await channel.send("two")
        third = await channel.send("three")
        newest = [m.content async for m in channel.history(limit=2)]
        assert newest == ["three", "two"]
        after_first = [m.content async for m in channel.history(after=first, oldest_first=True)]
        assert after_first == ["two", "three"]

        edited = await second.edit(content="two (edited)")
        assert edited.content == "two (edited)" and edited.edited_at is not None
        await third.delete()
        assert [m["content"] for m in fake.messages_in(CHANNEL)] == ["one", "two (edited)"]
        await client.wait_message(lambda m: m.content == "three", "echo of the third message")
        await third.channel.typing()
    assert fake.calls("POST", f"/channels/{CHANNEL}/typing")


# --------------------------------------------------------------------------- webhooks


async def test_webhook_create_and_send_with_persona(fake: FakeDiscord) -> None:
    avatar = f"{fake.cdn_base}/avatars/aria.png"
    async with running(RecordingClient()) as client:
        channel = text_channel(client)
        hook = await channel.create_webhook(name="companion-relay")
        assert hook.token and hook.channel_id == CHANNEL
        assert hook.user is not None and hook.user.id == fake.bot_id
        assert [h.id for h in await channel.webhooks()] == [hook.id]

        sent = await hook.send("hello from Aria", username="Aria", avatar_url=avatar, wait=True)
        assert sent.author.name == "Aria"
        assert sent.webhook_id == hook.id
        assert sent.content == "hello from Aria"
        call = fake.webhook_messages()[-1]
        assert call.json["username"] == "Aria"
        assert call.json["avatar_url"] == avatar
        assert call.path == f"/webhooks/{hook.id}/{hook.token}"

        thread = client.get_channel(THREAD)
        assert isinstance(thread, discord.Thread)
        in_thread = await hook.send("in thread", username="Aria", thread=thread, wait=True)
        assert in_thread.channel.id == THREAD
        assert fake.webhook_messages()[-1].query["thread_id"] == str(THREAD)

        # The gateway echo carries webhook_id, which adapters use to ignore their own webhooks.
        echo = await client.wait_message(lambda m: m.content == "in thread", "webhook echo")
        assert echo.webhook_id == hook.id and echo.channel.id == THREAD

        with pytest.raises(discord.HTTPException) as bad_name:
            await hook.send("x", username="Discord Bot", wait=True)
        assert bad_name.value.code == 50035


async def test_without_manage_webhooks_webhook_calls_are_forbidden(fake: FakeDiscord) -> None:
    fake.manage_webhooks = False
    async with running(RecordingClient()) as client:
        channel = text_channel(client)
        assert channel.guild.me is not None
        assert not channel.permissions_for(channel.guild.me).manage_webhooks
        with pytest.raises(discord.Forbidden) as create_error:
            await channel.create_webhook(name="companion-relay")
        assert create_error.value.code == 50013
        with pytest.raises(discord.Forbidden):
            await channel.webhooks()
        # Granting the permission later updates the client's role cache too.
        await fake.set_manage_webhooks(True)
        hook = await channel.create_webhook(name="companion-relay")
        assert hook.id


# --------------------------------------------------------------------------- failures


async def test_429_with_via_is_retried(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        fake.fail_next("POST", f"/channels/{CHANNEL}/messages", retry_after=0.05)
        message = await text_channel(client).send("after the rate limit")
        assert message.content == "after the rate limit"
    attempts = fake.sent_messages(CHANNEL, include_failed=True)
    assert [c.status for c in attempts] == [429, 200]
    assert attempts[0].response["retry_after"] == 0.05
    assert len(fake.sent_messages(CHANNEL)) == 1


async def test_429_without_via_is_raised(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        fake.fail_next("POST", f"/channels/{CHANNEL}/messages", via_header=False)
        with pytest.raises(discord.HTTPException) as error:
            await text_channel(client).send("blocked")
        assert error.value.status == 429
        assert len(fake.sent_messages(CHANNEL, include_failed=True)) == 1
        # The failure was used up: the next send goes through.
        await text_channel(client).send("fine")
    assert [c.status for c in fake.sent_messages(CHANNEL, include_failed=True)] == [429, 200]


async def test_server_error_is_retried_by_discord_py(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        fake.fail_next("POST", f"/channels/{CHANNEL}/messages", status=500)
        await text_channel(client).send("eventually")
    assert [c.status for c in fake.sent_messages(CHANNEL, include_failed=True)] == [500, 200]


# --------------------------------------------------------------------------- gateway resume


async def test_reconnect_resumes_and_replays_missed_events_once(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        await fake.reconnect()
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="during")
        await asyncio.wait_for(client.resumed.wait(), TIMEOUT)
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="after")
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="sentinel")
        await client.wait_message(lambda m: m.content == "sentinel")
        assert [m.content for m in client.received] == ["during", "after", "sentinel"]
    assert len(fake.identifies) == 1
    assert len(fake.resumes) == 1
    assert fake.resumes[0]["token"] == BOT_TOKEN
    assert isinstance(fake.resumes[0]["seq"], int)
    assert fake.gateway_connections == ["/gateway", "/resume-gateway"]


async def test_late_channels_and_server_side_disconnect(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        fake.add_text_channel(GUILD, 21, "later")
        fake.add_thread(GUILD, 21, 31, "later-thread")
        await fake.announce_channel(21)
        await fake.announce_channel(31)
        fake.add_guild(11, "Second Guild")
        fake.add_text_channel(11, 40, "elsewhere")
        await fake.announce_guild(11)
        await fake.reconnect(wait=True)  # the announcements were delivered before RECONNECT
        assert isinstance(client.get_channel(21), discord.TextChannel)
        assert isinstance(client.get_channel(31), discord.Thread)
        assert isinstance(client.get_channel(40), discord.TextChannel)

        await fake.disconnect(code=4000)  # resumable close code
        await fake.wait_until(lambda: fake.resumed_count == 2, TIMEOUT, "the second RESUME")
        await fake.message_create(channel_id=40, author_id=ALICE, content="still here")
        await client.wait_message(lambda m: m.content == "still here")
    assert len(fake.identifies) == 1


async def test_invalid_session_makes_the_client_identify_again(fake: FakeDiscord) -> None:
    async with running(RecordingClient()) as client:
        await fake.invalidate_session()
        await fake.wait_until(lambda: len(fake.identifies) == 2 and fake.connected, TIMEOUT)
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="new session")
        await client.wait_message(lambda m: m.content == "new session")
    assert fake.resumes == []
    assert client.identify_initial == [True, False]
    assert len(set(fake.session_ids)) == 1  # the invalidated session is gone


async def test_injecting_events_needs_a_session_and_a_known_channel(fake: FakeDiscord) -> None:
    with pytest.raises(RuntimeError, match="no client has identified"):
        await fake.message_create(channel_id=CHANNEL, author_id=ALICE, content="nobody")
    assert fake.messages_in(CHANNEL) == []
    async with running(RecordingClient()):
        with pytest.raises(KeyError, match="unknown channel"):
            await fake.message_create(channel_id=999, author_id=ALICE, content="nowhere")
    await fake.wait_until(lambda: not fake.connected, TIMEOUT, "the websocket to close")
    # discord.py's close() interrupts its receive loop, which closes with 4000, not 1000: like
    # Discord, the fake keeps such a session resumable (events are kept for a RESUME).
    assert len(fake.session_ids) == 1
    await fake.dispatch("TYPING_START", {"channel_id": str(CHANNEL), "user_id": str(ALICE)})


# --------------------------------------------------------------------------- app commands


async def test_command_tree_sync_is_recorded(fake: FakeDiscord) -> None:
    client = RecordingClient()
    tree = make_tree(client)

    @tree.command(name="ping", description="Check the bot")
    async def ping(interaction: discord.Interaction[RecordingClient]) -> None:
        await interaction.response.send_message("pong")

    @tree.command(name="forget", description="Forget me", guild=discord.Object(GUILD))
    async def forget(interaction: discord.Interaction[RecordingClient]) -> None:
        await interaction.response.send_message("forgotten")

    async with running(client):
        synced = await tree.sync()
        guild_synced = await tree.sync(guild=discord.Object(GUILD))
        again = await tree.sync()
    assert [c.name for c in synced] == ["ping"]
    assert synced[0].id == int(fake.commands[None][0]["id"]) == again[0].id
    assert [c.name for c in guild_synced] == ["forget"]
    assert guild_synced[0].guild_id == GUILD
    assert [c["name"] for c in fake.commands[GUILD]] == ["forget"]
    puts = fake.calls("PUT", f"/applications/{fake.application_id}/commands")
    assert len(puts) == 2
    assert puts[0].json[0]["description"] == "Check the bot"


async def test_interaction_reaches_the_command_and_its_response_is_recorded(
    fake: FakeDiscord,
) -> None:
    client = RecordingClient()
    tree = make_tree(client)
    seen: list[tuple[int, int | None, int | None, str]] = []
    callbacks: list[discord.InteractionCallbackResponse[RecordingClient]] = []

    @tree.command(name="echo", description="Echo text")
    async def echo(interaction: discord.Interaction[RecordingClient], text: str) -> None:
        seen.append((interaction.user.id, interaction.guild_id, interaction.channel_id, text))
        callbacks.append(await interaction.response.send_message(f"echo: {text}", ephemeral=True))
        await interaction.followup.send("and more")

    async with running(client):
        await tree.sync()
        payload = await fake.interaction(
            name="echo",
            user_id=ALICE,
            options=[{"name": "text", "value": "hi"}],
            channel_id=CHANNEL,
        )
        path = f"/interactions/{payload['id']}/{payload['token']}/callback"
        call = await fake.wait_for_rest(lambda c: c.path == path)
        followup = await fake.wait_for_rest(
            lambda c: c.path == f"/webhooks/{fake.application_id}/{payload['token']}"
        )
    assert seen == [(ALICE, GUILD, CHANNEL, "hi")]
    assert call.status == 200 and call.query["with_response"] in ("1", "true")
    assert call.json["type"] == 4
    assert call.json["data"]["content"] == "echo: hi"
    assert call.json["data"]["flags"] == 64
    assert fake.interaction_responses() == [call]
    assert followup.json["content"] == "and more"
    assert callbacks[0].message_id is not None and callbacks[0].is_ephemeral()
    assert payload["attachment_size_limit"] > 0
    assert payload["data"]["id"] == fake.commands[None][0]["id"]


async def test_subcommand_in_dm_with_deferred_response(fake: FakeDiscord) -> None:
    client = RecordingClient()
    tree = make_tree(client)
    memory = app_commands.Group(name="memory", description="Memory tools")
    channels: list[object] = []

    @memory.command(name="forget", description="Forget everything")
    async def forget(interaction: discord.Interaction[RecordingClient]) -> None:
        channels.append(interaction.channel)
        await interaction.response.defer(thinking=True)
        await interaction.edit_original_response(content="forgotten")

    tree.add_command(memory)
    async with running(client):
        payload = await fake.interaction(name="memory", sub="forget", user_id=ALICE)
        token = payload["token"]
        edit = await fake.wait_for_rest(
            lambda c: c.method == "PATCH" and c.path.endswith(f"/{token}/messages/@original")
        )
    assert isinstance(channels[0], discord.DMChannel)
    assert payload["context"] == 1 and "guild_id" not in payload
    assert fake.interaction_responses()[0].json["type"] == 5
    assert edit.json["content"] == "forgotten"
    assert edit.response["content"] == "forgotten"


async def test_late_interaction_response_is_unknown(fake: FakeDiscord) -> None:
    client = RecordingClient()
    tree = make_tree(client)
    codes: list[int] = []
    fake.interaction_deadline = 0.0  # every response is already too late

    @tree.command(name="slow", description="Too slow")
    async def slow(interaction: discord.Interaction[RecordingClient]) -> None:
        try:
            await interaction.response.send_message("late")
        except discord.NotFound as error:
            codes.append(error.code)

    async with running(client):
        await fake.interaction(name="slow", user_id=ALICE, guild_id=GUILD)
        await fake.wait_until(lambda: fake.interaction_responses(include_failed=True), TIMEOUT)
    assert codes == [10062]


async def test_interaction_callback_is_accepted_only_once(fake: FakeDiscord) -> None:
    async with running(RecordingClient()):
        payload = await fake.interaction(name="raw", user_id=ALICE, guild_id=GUILD)
    url = f"{fake.api_base}/interactions/{payload['id']}/{payload['token']}/callback"
    body = {"type": 4, "data": {"content": "first"}}
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=body) as first:
            assert first.status == 204
        async with http.post(url, json=body) as second:
            assert second.status == 400
            assert (await second.json())["code"] == 40060


# --------------------------------------------------------------------------- raw HTTP


async def test_raw_rest_contract(fake: FakeDiscord) -> None:
    auth = {"Authorization": f"Bot {BOT_TOKEN}"}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{fake.api_base}/users/@me") as anonymous:
            assert anonymous.status == 401
        async with http.get(f"{fake.api_base}/users/@me", headers=auth) as me:
            assert me.status == 200
            assert me.headers["Content-Type"] == "application/json"
            assert (await me.json())["id"] == str(fake.bot_id)
        async with http.get(f"{fake.api_base}/no/such/route", headers=auth) as missing:
            assert missing.status == 404
            assert await missing.json() == {"message": "404: Not Found", "code": 0}
        async with http.post(
            f"{fake.api_base}/channels/{CHANNEL}/messages", headers=auth, json={"content": "  "}
        ) as empty:
            assert empty.status == 400
            assert (await empty.json())["code"] == 50006
        async with http.get(f"{fake.api_base}/gateway/bot", headers=auth) as gateway:
            data = await gateway.json()
            assert data["url"] == fake.gateway_url and data["shards"] == 1
