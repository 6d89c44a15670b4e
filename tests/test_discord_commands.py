"""Slash commands on Discord: a command runs as the gateway's command, its answer comes back
as the interaction's follow-up, and /admin answers a non-owner like an unknown command."""

from __future__ import annotations

from pathlib import Path

from bot.commands.table import UNKNOWN
from tests.discord_harness import (
    ALICE,
    CHANNEL,
    OWNER,
    TIMEOUT,
    DiscordGateways,
    discord_gateways,  # noqa: F401 (the gateways fixture)
    eventually,
    tea_house,  # noqa: F401 (the fake fixture)
)
from tests.fakes.fake_discord import FakeDiscord, RestCall
from tests.fakes.fake_llm import FakeLLM

EPHEMERAL = 1 << 6


async def answer_to(fake: FakeDiscord, payload: dict) -> tuple[RestCall, RestCall]:
    """The interaction's callback (the deferral) and its first follow-up (the answer)."""
    callback_path = f"/interactions/{payload['id']}/{payload['token']}/callback"
    callback = await fake.wait_for_rest(lambda c: c.path == callback_path, TIMEOUT)
    followup = await fake.wait_for_rest(
        lambda c: c.method == "POST" and c.path.endswith(payload["token"]), TIMEOUT
    )
    return callback, followup


async def test_help_round_trip_in_a_dm(gateways: DiscordGateways, fake: FakeDiscord) -> None:
    await gateways.start()
    payload = await fake.interaction(name="help", user_id=ALICE)
    callback, followup = await answer_to(fake, payload)
    assert callback.json["type"] == 5  # deferred: the gateway answers as a follow-up
    assert not callback.json.get("data", {}).get("flags", 0) & EPHEMERAL
    assert "/partner" in followup.json["content"]
    assert "/admin" not in followup.json["content"]
    assert "everyone" not in followup.json["allowed_mentions"]["parse"]
    assert fake.sent_messages() == []  # answered in the interaction, not as a new message


async def test_partner_option_selects_the_partner(
    gateways: DiscordGateways, fake: FakeDiscord, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start()
    payload = await fake.interaction(
        name="partner", user_id=ALICE, options=[{"name": "id", "value": "sol"}]
    )
    _, followup = await answer_to(fake, payload)
    assert "talking with Sol" in followup.json["content"]
    assert await gateway.app.store.selected_partner(f"discord:{ALICE}") == "sol"
    await fake.dm_message(user_id=ALICE, content="hello again")
    await fake.wait_for_rest(
        lambda c: c.ok and c.path == f"/channels/{fake.dm_channel_id(ALICE)}/messages", TIMEOUT
    )
    assert "You are Sol." in str(fake_llm.requests[-1]["messages"][0]["content"])


async def test_admin_from_a_non_owner_gets_the_unknown_command_answer(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start()
    payload = await fake.interaction(
        name="admin", user_id=ALICE, options=[{"name": "command", "value": "partners"}]
    )
    callback, followup = await answer_to(fake, payload)
    assert callback.json["data"]["flags"] & EPHEMERAL  # /admin is answered privately
    assert followup.json["content"] == UNKNOWN


async def test_admin_from_a_non_owner_in_a_server_channel_ends_as_quietly_as_chatter(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    """In a server channel a command the sender may not run is never answered: /admin from
    a non-owner is deferred (Discord wants an answer within 3 s) and the deferral removed,
    as for any command the gateway keeps silent about there."""
    await gateways.start()
    payload = await fake.interaction(
        name="admin", user_id=ALICE, channel_id=CHANNEL,
        options=[{"name": "command", "value": "partners"}],
    )  # fmt: skip
    original = f"/webhooks/{fake.application_id}/{payload['token']}/messages/@original"
    deleted = await fake.wait_for_rest(lambda c: c.method == "DELETE" and c.path == original)
    assert deleted.ok
    token = payload["token"]
    followups = [c for c in fake.rest_calls if c.method == "POST" and c.path.endswith(token)]
    assert followups == []
    assert fake.sent_messages() == [] and fake.webhook_messages() == []


async def test_admin_from_the_owner_runs_the_owner_command(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start()
    payload = await fake.interaction(
        name="admin", user_id=OWNER, options=[{"name": "command", "value": "partners"}]
    )
    _, followup = await answer_to(fake, payload)
    assert "Mira (example)" in followup.json["content"]
    assert followup.json["flags"] & EPHEMERAL


async def test_owner_binds_a_channel_with_the_admin_command(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    gateway = await gateways.start(bind=[])
    payload = await fake.interaction(
        name="admin", user_id=OWNER, channel_id=CHANNEL,
        options=[{"name": "command", "value": "bind example"}],
    )  # fmt: skip
    _, followup = await answer_to(fake, payload)
    assert "Mira now answers here" in followup.json["content"]
    assert await gateway.app.store.bindings("discord") != []
    # the channel learns of it (it fetches what it missed there after a reconnect)
    bound = (str(CHANNEL),)
    await eventually(lambda: gateway.channel.view.bound_chats == bound, "the channel's view")


async def test_command_in_an_unbound_channel_ends_quietly(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start(bind=[])
    payload = await fake.interaction(name="help", user_id=ALICE, channel_id=CHANNEL)
    original = f"/webhooks/{fake.application_id}/{payload['token']}/messages/@original"
    deleted = await fake.wait_for_rest(lambda c: c.method == "DELETE" and c.path == original)
    assert deleted.ok


async def test_a_command_that_answers_with_a_file_answers_the_interaction(
    gateways: DiscordGateways, fake: FakeDiscord
) -> None:
    await gateways.start()
    payload = await fake.interaction(name="export", user_id=ALICE)
    _, followup = await answer_to(fake, payload)
    [(filename, data)] = followup.files
    assert filename and data
    assert followup.json["content"]
    assert fake.sent_messages() == []


async def test_owner_sends_an_edited_persona_file_with_the_command_as_caption(
    gateways: DiscordGateways, fake: FakeDiscord, tmp_path: Path
) -> None:
    await gateways.start()
    owner_dm = fake.dm_channel_id(OWNER)
    await fake.dm_message(user_id=OWNER, content="/admin partner edit example SOUL.md")
    sent = await fake.wait_for_rest(lambda c: c.ok and c.path == f"/channels/{owner_dm}/messages")
    put = sent.json["content"].splitlines()[-1]
    assert put.startswith("/admin partner put example SOUL.md ") and sent.files
    edited = b"- loves rainy afternoons\n"
    await fake.dm_message(
        user_id=OWNER, content=put, attachments=[{"filename": "SOUL.md", "data": edited}]
    )
    await fake.wait_until(lambda: len(fake.sent_messages(owner_dm)) == 2, TIMEOUT, "the answer")
    assert "Saved SOUL.md" in fake.sent_messages(owner_dm)[1].json["content"]
    soul = tmp_path / "data" / "partners" / "example" / "SOUL.md"
    assert soul.read_bytes() == edited
