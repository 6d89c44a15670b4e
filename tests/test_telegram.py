"""The Telegram channel end to end: real python-telegram-bot against the fake Bot API and the
fake LLM. Private chats, the partner picker, access (pairing, allowlist), groups (mention
gating, forum topics, several partners), unsupported messages and the command menu."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bot.gateway.access
from bot.commands.table import COMMANDS
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    BOT_USERNAME,
    GROUP,
    OWNER,
    TelegramGateways,
    replying_to,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
    texts,
)

ALICE = 501


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def all_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


# ---- private chats -----------------------------------------------------------------------


async def test_dm_message_gets_the_partners_reply(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start()
    fake_llm.script(Reply(text="Hello **Alice**, nice to meet you"))
    fake.send_user_message(chat_id=ALICE, text="hi there", first_name="Alice")
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.params["parse_mode"] == "HTML"
    assert reply.text == "Hello <b>Alice</b>, nice to meet you"
    assert "hi there" in fake_llm.last_user_text()
    assert "You are Mira." in system_prompt(fake_llm.requests[0])


@contextlib.contextmanager
def database_locked(path: Path) -> Iterator[None]:
    """Another writer holds the database's write lock: the gateway can read, not store."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


def offsets(fake: FakeTelegram) -> list[int]:
    return [int(c.params.get("offset") or 0) for c in fake.calls if c.method == "getUpdates"]


async def test_dm_update_is_confirmed_only_after_it_is_stored(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    await fake.wait_for_pending_polls()
    with database_locked(gateway.config.data_dir / "gateway.db"):
        update_id = fake.push_update(fake.message_update(chat_id=ALICE, text="remember me"))
        # storing it fails (the database stays locked past its busy timeout): the owner is
        # told, and the poll asks Telegram again without confirming it
        [notice] = await fake.wait_for_sent(chat_id=OWNER, timeout=20)
        assert "cannot store incoming Telegram messages" in (notice.text or "")
        since = len(fake.calls)
        await fake.wait_for_call(lambda c: c.method == "getUpdates", since=since, timeout=10)
        assert max(offsets(fake)) <= update_id
        assert update_id in [u["update_id"] for u in fake.pending_updates]
        assert await gateway.app.store.update_seen("telegram", str(update_id)) is False

    fake_llm.script(Reply(text="I will"))
    [reply] = await fake.wait_for_sent(chat_id=ALICE, timeout=15)
    assert reply.text == "I will"
    confirming = await fake.wait_for_call(
        lambda c: c.method == "getUpdates" and (c.params.get("offset") or 0) > update_id,
        include_pending=True,
    )
    assert confirming.params["offset"] == update_id + 1
    assert await gateway.app.store.update_seen("telegram", str(update_id)) is True


async def test_command_menu_shows_admin_only_in_the_owners_chat(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    await gateways.start()
    default = fake.commands[(json.dumps({"type": "default"}), "")]
    owner_scope = json.dumps({"chat_id": OWNER, "type": "chat"}, sort_keys=True)
    owner = fake.commands[(owner_scope, "")]
    user_commands = [c.name for c in COMMANDS.values() if not c.owner_only]
    assert [c["command"] for c in default] == user_commands
    assert {"start", "help", "partner", "new"} <= set(user_commands)
    assert [c["command"] for c in owner] == [*user_commands, "admin"]
    assert fake.sent("deleteWebhook")


async def test_a_discord_owners_id_gets_no_admin_menu_on_telegram(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    # ids are per platform: the Discord owner 555 and the Telegram user 555 are two people
    await gateways.start(owner={"discord_ids": [555]})
    scopes = {json.loads(scope)["chat_id"] for scope, _ in fake.commands if "chat_id" in scope}
    assert scopes == {OWNER}


async def test_partner_picker_offers_buttons_and_a_press_selects(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start()
    fake.send_user_message(chat_id=ALICE, text="hello?")
    [menu] = await fake.wait_for_sent(chat_id=ALICE)
    buttons = [row[0] for row in menu.params["reply_markup"]["inline_keyboard"]]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [
        ("Mira", "/partner example"),
        ("Sol", "/partner sol"),
    ]
    assert fake_llm.requests == []

    fake.push_update(
        fake.callback_query_update(
            chat_id=ALICE, user_id=ALICE, data="/partner sol", message_id=menu.result["message_id"]
        )
    )
    chosen = await fake.wait_for_sent(chat_id=ALICE, count=2)
    assert "talking with Sol" in (chosen[1].text or "")
    assert fake.answered_callback_queries

    fake.send_user_message(chat_id=ALICE, text="so, Sol, how are you?")
    await fake.wait_for_sent(chat_id=ALICE, count=3)
    assert "You are Sol." in system_prompt(fake_llm.requests[-1])
    session = await gateway.app.store.open_session(f"telegram:{ALICE}", "sol")
    assert session is not None


async def test_partner_is_locked_for_the_session_and_new_starts_another(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start()
    store, chat_key = gateway.app.store, f"telegram:{ALICE}"
    fake.send_user_message(chat_id=ALICE, text="/partner sol")
    fake.send_user_message(chat_id=ALICE, text="first words")
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    first = await store.open_session(chat_key, "sol")
    assert first is not None

    fake.send_user_message(chat_id=ALICE, text="more words")
    await fake.wait_for_sent(chat_id=ALICE, count=3)
    assert (await store.open_session(chat_key, "sol")).id == first.id  # type: ignore[union-attr]
    assert all("You are Sol." in system_prompt(r) for r in fake_llm.requests)

    fake.send_user_message(chat_id=ALICE, text="/new")
    replies = await fake.wait_for_sent(chat_id=ALICE, count=4)
    assert "new conversation" in (replies[3].text or "")
    assert await store.open_session(chat_key, "sol") is None
    fake.send_user_message(chat_id=ALICE, text="fresh start")
    await fake.wait_for_sent(chat_id=ALICE, count=5)
    second = await store.open_session(chat_key, "sol")
    assert second is not None and second.id != first.id


# ---- access ----------------------------------------------------------------------------


async def test_pairing_code_reaches_the_owner_and_approval_lets_the_user_in(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(access={"dm_policy": "pairing"})
    fake.send_user_message(chat_id=ALICE, text="hi!", first_name="Alice", username="alice")
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    [notice] = await fake.wait_for_sent(chat_id=OWNER)
    code = (notice.text or "").split("/admin approve ")[1].split()[0].rstrip(".")
    assert code in (answer.text or "")
    assert "Alice @alice" in (notice.text or "") and str(ALICE) in (notice.text or "")
    assert fake_llm.requests == []

    fake.send_user_message(chat_id=OWNER, text=f"/admin approve {code}", first_name="Owner")
    approved = await fake.wait_for_sent(chat_id=OWNER, count=2)
    assert f"telegram:{ALICE}" in (approved[1].text or "")
    welcome = await fake.wait_for_sent(chat_id=ALICE, count=2)
    assert "You're in" in (welcome[1].text or "")

    fake_llm.script(Reply(text="Lovely to meet you"))
    fake.send_user_message(chat_id=ALICE, text="thank you!")
    replies = await fake.wait_for_sent(chat_id=ALICE, count=3)
    assert replies[2].text == "Lovely to meet you"


async def test_an_expired_pairing_code_is_refused(
    gateways: TelegramGateways, fake: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bot.gateway.access, "PAIRING_TTL_SECONDS", -1)  # born expired: no waiting
    gateway = await gateways.start(access={"dm_policy": "pairing"})
    fake.send_user_message(chat_id=ALICE, text="hi!")
    [notice] = await fake.wait_for_sent(chat_id=OWNER)
    code = (notice.text or "").split("/admin approve ")[1].split()[0]
    fake.send_user_message(chat_id=OWNER, text=f"/admin approve {code}")
    answers = await fake.wait_for_sent(chat_id=OWNER, count=2)
    assert "expired" in (answers[1].text or "")
    user = await gateway.app.store.user(f"telegram:{ALICE}")
    assert user is not None and user["access"] != "allowed"


async def test_allowlist_lets_listed_users_in_and_turns_others_away(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    await gateways.start(access={"dm_policy": "allowlist", "allow": [f"telegram:{ALICE}"]})
    fake.send_user_message(chat_id=777, text="let me in", first_name="Mallory")
    [refusal] = await fake.wait_for_sent(chat_id=777)
    assert "private" in (refusal.text or "")
    assert fake_llm.requests == []
    fake.send_user_message(chat_id=ALICE, text="hello")
    await fake.wait_for_sent(chat_id=ALICE)
    assert len(fake_llm.requests) == 1 and "hello" in fake_llm.last_user_text()


async def test_unsupported_messages_get_a_polite_line_in_dms_and_silence_in_groups(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    fake.send_user_message(chat_id=ALICE, document=True)
    [answer] = await fake.wait_for_sent(chat_id=ALICE)
    assert "can't open that kind of file" in (answer.text or "")
    fake.send_user_message(chat_id=GROUP, chat_type="supergroup", voice=True, user_id=ALICE)
    fake.send_user_message(chat_id=ALICE, photo=True, caption="what a sunset")
    await fake.wait_for_sent(chat_id=ALICE, count=2)
    assert len(fake_llm.requests) == 1  # the photo's caption; never the file
    assert fake_llm.last_user_text().endswith("what a sunset")
    await settled(fake, gateway)
    assert fake.sent("sendMessage", GROUP) == []


# ---- groups ----------------------------------------------------------------------------


async def test_group_chatter_is_context_and_a_mention_is_answered_with_it(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    fake.send_user_message(
        chat_id=GROUP,
        chat_type="supergroup",
        text="anyone seen my umbrella?",
        user_id=7,
        first_name="Bob",
    )
    await settled(fake, gateway)
    assert fake_llm.requests == [] and fake.sent("sendMessage", GROUP) == []

    fake_llm.script(Reply(text="It's by the door, Bob"))
    text = f"@{BOT_USERNAME} do you know?"
    update = fake.send_user_message(
        chat_id=GROUP,
        chat_type="supergroup",
        text=text,
        user_id=8,
        first_name="Carol",
        entities=fake.mention_entity(text),
    )
    [reply] = await fake.wait_for_sent(replying_to(update["message"]["message_id"]), chat_id=GROUP)
    assert reply.text == "It's by the door, Bob"
    request = all_text(fake_llm.requests[0])
    assert "umbrella" in request and "not addressed to you" in request


async def test_a_non_owners_admin_in_a_group_meets_the_silence_of_an_unknown_command(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """DESIGN "Commands": a non-owner who tries /admin learns nothing. In a group a command
    the sender may not run is chatter, even when it names this bot (``/cmd@bot``): context,
    silence, as on Discord, for an unknown command and /admin alike."""
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    unaddressed = ["/admin partners", "/nosuchcommand"]
    addressed = [f"/admin@{BOT_USERNAME} partners", f"/nosuchcommand@{BOT_USERNAME}"]
    sent: dict[str, int] = {}
    for text in unaddressed + addressed:
        update = fake.send_user_message(
            chat_id=GROUP, chat_type="supergroup", text=text, user_id=ALICE
        )
        sent[text] = update["message"]["message_id"]
    fake_llm.script(Reply(text="Hello Alice"))
    text = f"@{BOT_USERNAME} hello"
    fake.send_user_message(
        chat_id=GROUP,
        chat_type="supergroup",
        text=text,
        user_id=ALICE,
        entities=fake.mention_entity(text),
    )
    # one chat is handled in order: once this is answered, every probe before it was
    await fake.wait_for_call(lambda c: c.method == "sendMessage" and c.text == "Hello Alice")
    await gateway.app.dispatcher.idle()

    def answers(message_id: int) -> list[str]:
        return texts([c for c in fake.sent("sendMessage", GROUP) if replying_to(message_id)(c)])

    assert [answers(sent[text]) for text in unaddressed + addressed] == [[], [], [], []]
    assert texts(fake.sent("sendMessage", GROUP)) == ["Hello Alice"]
    assert len(fake_llm.requests) == 1  # the chatter reached the model only as context


async def test_a_reply_to_the_bot_addresses_it(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    text = f"@{BOT_USERNAME} hello"
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text=text, entities=fake.mention_entity(text)
    )
    [first] = await fake.wait_for_sent(chat_id=GROUP)
    fake.send_user_message(
        chat_id=GROUP,
        chat_type="supergroup",
        text="and what about tea?",
        reply_to_message=first.result,
    )
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    assert "what about tea" in fake_llm.last_user_text()


async def test_forum_topics_are_separate_conversations(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    for topic, words in ((10, "the secret word is pumpkin"), (20, "what did I say?")):
        text = f"@{BOT_USERNAME} {words}"
        fake.send_user_message(
            chat_id=GROUP,
            chat_type="supergroup",
            text=text,
            message_thread_id=topic,
            is_topic_message=True,
            entities=fake.mention_entity(text),
        )
        [reply] = await fake.wait_for_sent(
            lambda c, t=topic: c.params.get("message_thread_id") == t
        )
        assert reply.result["is_topic_message"] is True
    assert "pumpkin" not in all_text(fake_llm.requests[1])
    store = gateway.app.store
    ten = await store.open_session(f"telegram:{GROUP}:10", "example")
    twenty = await store.open_session(f"telegram:{GROUP}:20", "example")
    assert ten is not None and twenty is not None and ten.id != twenty.id


async def test_two_partners_in_one_group_answer_by_name(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start()
    for partner in ("example", "sol"):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    fake_llm.script(Reply(text="Sunny as ever."), Reply(text="Tea time!"))
    fake.send_user_message(chat_id=GROUP, chat_type="supergroup", text="Sol, how's the weather?")
    [sol] = await fake.wait_for_sent(chat_id=GROUP)
    assert sol.text == "<b>Sol</b>: Sunny as ever."
    assert "You are Sol." in system_prompt(fake_llm.requests[0])
    fake.send_user_message(chat_id=GROUP, chat_type="supergroup", text="and you, Mira?")
    replies = await fake.wait_for_sent(chat_id=GROUP, count=2)
    assert replies[1].text == "<b>Mira</b>: Tea time!"
    assert "You are Mira." in system_prompt(fake_llm.requests[1])


async def test_binding_in_privacy_mode_warns_the_owner(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    fake.can_read_all_group_messages = False
    await gateways.start()
    fake.send_user_message(
        chat_id=GROUP,
        chat_type="supergroup",
        text=f"/admin@{BOT_USERNAME} bind example",
        user_id=OWNER,
        first_name="Owner",
    )
    [answer] = await fake.wait_for_sent(chat_id=GROUP)
    assert "Mira now answers here." in (answer.text or "")
    assert "privacy mode" in (answer.text or "") and "@BotFather" in (answer.text or "")


async def test_binding_without_privacy_mode_has_no_warning(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    await gateways.start()
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text="/admin bind example", user_id=OWNER
    )
    [answer] = await fake.wait_for_sent(chat_id=GROUP)
    assert texts([answer]) == ["Mira now answers here."]


async def test_owner_edits_a_persona_file_by_sending_the_document_back(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    fake.send_user_message(chat_id=OWNER, text="/admin partner edit example SOUL.md")
    [sent] = await fake.wait_for_sent(chat_id=OWNER, method="sendDocument")
    put = next(line for line in sent.params["caption"].splitlines() if "partner put" in line)
    command = put[put.index("/admin partner put") :].split("`")[0].strip()
    update = fake.message_update(chat_id=OWNER, caption=command, document=True)
    edited = b"# Soul\r\nCalm and funny.\r\n"
    fake.add_file(update["message"]["document"]["file_id"], edited)
    fake.push_update(update)
    await fake.wait_for_sent(lambda c: "Saved SOUL.md" in (c.text or ""), chat_id=OWNER)
    soul = gateway.app.catalog.require("example").dir / "SOUL.md"
    assert soul.read_bytes() == b"# Soul\nCalm and funny.\n"  # the file keeps its line endings


# ---- text that UTF-8 cannot hold ---------------------------------------------------------


async def test_lone_surrogates_in_a_message_and_a_name_are_replaced_not_dropped(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """Telegram's JSON may carry a broken "\\ud83d" escape (half an emoji): the update still
    gets its answer, with U+FFFD where the half character was."""
    gateway = await gateways.start()
    fake_llm.script(Reply(text="Hello, Ann"))
    fake.send_user_message(
        chat_id=ALICE, text="hi \ud83d there", first_name="Ann\ud83d", username="ann\udc00"
    )
    [reply] = await fake.wait_for_sent(chat_id=ALICE)
    assert reply.text == "Hello, Ann"
    assert fake_llm.last_user_text().endswith("hi \ufffd there")
    user = await gateway.app.store.user(f"telegram:{ALICE}")
    assert user is not None
    assert (user["display_name"], user["username"]) == ("Ann\ufffd", "ann\ufffd")
