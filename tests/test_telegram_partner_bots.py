"""Partners with bot accounts of their own (``[telegram.bots]``), end to end on the real
python-telegram-bot against the fake Bot API: in a scene each partner's messages come from its
own bot token (previews and their edits too), the main bot alone polls and still receives
every group message, replies to and mentions of a partner's bot address that partner, a
partner without a token speaks through the main bot with its name in front, a partner bot that
may not write in a group gives way to the main bot (the owner told once), and ``companion
doctor`` names a bad partner token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config.model import ConfigError, load_config, parse_config
from partners.catalog import PartnerCatalog
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import TOKEN, FakeTelegram
from tests.telegram_harness import (
    GROUP,
    OWNER,
    Gateway,
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
)
from tests.test_doctor import bad, doctor, no_openai_key, write_config  # noqa: F401
from tests.test_scenes import NAMES, say, speaker_of

MIRA_TOKEN, MIRA_BOT = "7001:MIRA-OWN-BOT", 7001
SOL_TOKEN, SOL_BOT = "7002:SOL-OWN-BOT", 7002
MAIN_BOT = 999
ALICE = 501
SEND_ONLY = {"getMe", "sendMessage", "editMessageText", "deleteMessage", "sendChatAction"}
"""What a partner's bot may ever be asked to do here: it never polls, never sets a webhook or
a command menu."""


def own_bots(fake: FakeTelegram) -> dict[str, Any]:
    fake.add_bot(MIRA_TOKEN, MIRA_BOT, "mira_own_bot", "Mira")
    fake.add_bot(SOL_TOKEN, SOL_BOT, "sol_own_bot", "Sol")
    return {"bots": {"example": MIRA_TOKEN, "sol": SOL_TOKEN}}


async def scene(
    gateways: TelegramGateways, *partners: str, telegram: dict[str, Any], **sections: Any
) -> Gateway:
    for partner in partners:
        gateways.add_partner(partner, NAMES[partner])
    gateway = await gateways.start(telegram=telegram, **sections)
    for partner in ("example", *partners):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    return gateway


def group_sends(fake: FakeTelegram) -> list[tuple[int | None, str]]:
    return [(c.bot_id, c.text or "") for c in fake.sent("sendMessage", GROUP)]


async def test_each_partner_speaks_through_its_own_bot_and_the_main_bot_alone_receives(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", telegram=own_bots(fake))
    fake_llm.script(Reply(text="I love rain."), Reply(text="Rain is fine by me."))
    say(fake, "What do both of you think of rain?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    # no name in front: the account itself says who speaks
    assert group_sends(fake) == [(MIRA_BOT, "I love rain."), (SOL_BOT, "Rain is fine by me.")]
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira", "Sol"]
    # the main bot polls and heard the group; the partners' bots only ever sent
    assert any(c.method == "getUpdates" and c.bot_id == MAIN_BOT for c in fake.calls)
    for bot_id in (MIRA_BOT, SOL_BOT):
        assert {c.method for c in fake.calls_by(bot_id)} <= SEND_ONLY
        assert any(c.method == "getMe" for c in fake.calls_by(bot_id))
    # Sol's words reached Mira's next prompt, though no bot receives another bot's messages
    fake_llm.script(Reply(text="Sol is right."))
    say(fake, "Mira, do you agree?")
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    assert "· Sol] Rain is fine by me." in str(fake_llm.requests[-1]["messages"])


async def test_a_reply_to_or_a_mention_of_a_partners_bot_is_for_that_partner(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", telegram=own_bots(fake))
    fake_llm.script(Reply(text="Sunny as ever."))
    say(fake, "Sol, how's the weather?")
    [sol] = await fake.wait_for_sent(chat_id=GROUP)
    await settled(fake, gateway)
    fake_llm.script(Reply(text="Rain tomorrow."))
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text="and tomorrow?", user_id=ALICE,
        reply_to_message=sol.result,
    )  # fmt: skip
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert speaker_of(fake_llm.requests[-1]) == "Sol"  # not the first bound, Mira
    assert group_sends(fake)[-1] == (SOL_BOT, "Rain tomorrow.")
    fake_llm.script(Reply(text="Here!"))
    text = "@sol_own_bot are you there?"
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text=text, user_id=ALICE,
        entities=fake.mention_entity(text, "sol_own_bot"),
    )  # fmt: skip
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol", "Sol", "Sol"]


async def test_a_partner_without_a_bot_of_its_own_speaks_through_the_main_bot_named(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", "kai", telegram=own_bots(fake))
    fake_llm.script(Reply(text="Hi!"), Reply(text="Hello."), Reply(text="Hey."))
    say(fake, "hello everyone")
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    await settled(fake, gateway)
    assert group_sends(fake) == [
        (MIRA_BOT, "Hi!"),
        (SOL_BOT, "Hello."),
        (MAIN_BOT, "<b>Kai</b>: Hey."),
    ]


async def test_in_a_dm_a_partner_speaks_through_the_main_bot(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    await gateways.start(telegram=own_bots(fake))
    fake_llm.script(Reply(text="Hello there."))
    fake.send_user_message(chat_id=OWNER, text="/partner example", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER)
    fake.send_user_message(chat_id=OWNER, text="hi Mira", user_id=OWNER)
    replies = await fake.wait_for_sent(chat_id=OWNER, count=2)
    assert replies[-1].text == "Hello there." and replies[-1].bot_id == MAIN_BOT


async def test_a_streamed_reply_is_previewed_and_edited_by_the_partners_own_bot(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", telegram={**own_bots(fake), "stream": True})
    answer = "Here is a **long** answer that arrives in pieces, " * 6
    fake_llm.script(Reply(text=answer))
    say(fake, "Sol, explain please")
    [preview] = await fake.wait_for_sent(chat_id=GROUP)
    await fake.wait_until(
        lambda: "<b>long</b>" in str([c.text for c in fake.sent("editMessageText", GROUP)]),
        description="the finished message",
    )
    await settled(fake, gateway)
    assert preview.bot_id == SOL_BOT  # with several partners, yet previewed: no name needed
    assert len(fake.sent("sendMessage", GROUP)) == 1
    edits = fake.sent("editMessageText", GROUP)
    assert edits and {c.bot_id for c in edits} == {SOL_BOT}


async def test_a_partner_bot_that_is_not_in_the_group_gives_way_to_the_main_bot(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", telegram=own_bots(fake))
    fake.non_member_chats.add((SOL_BOT, GROUP))
    fake_llm.script(Reply(text="Still here."), Reply(text="Me too."))
    say(fake, "Sol?")
    await fake.wait_for_sent(chat_id=GROUP)
    say(fake, "Sol, again?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert group_sends(fake) == [
        (MAIN_BOT, "<b>Sol</b>: Still here."),
        (MAIN_BOT, "<b>Sol</b>: Me too."),
    ]
    refused = [c for c in fake.calls_by(SOL_BOT) if c.method == "sendMessage"]
    assert [c.status for c in refused] == [403]  # tried once, then the main bot speaks there
    notices = [c.text or "" for c in fake.sent("sendMessage", OWNER)]
    assert len([n for n in notices if "own bot may not write" in n]) == 1
    assert any("Add that bot to the group" in n for n in notices)


async def test_a_refused_partner_token_at_start_is_told_to_the_owner_and_not_fatal(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    bots = own_bots(fake)
    del fake.other_bots[SOL_TOKEN]  # revoked at @BotFather since
    gateway = await scene(gateways, "sol", telegram=bots)
    notice = await fake.wait_for_sent(
        lambda c: "telegram.bots.sol" in (c.text or ""), chat_id=OWNER
    )
    assert "@BotFather" in (notice[0].text or "")
    fake_llm.script(Reply(text="Hello."))
    say(fake, "Sol, hello")
    await fake.wait_for_sent(chat_id=GROUP)
    await settled(fake, gateway)
    assert group_sends(fake) == [(MAIN_BOT, "<b>Sol</b>: Hello.")]


async def test_telegram_bots_naming_no_partner_stops_the_start_with_the_id_named(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    fake.add_bot(SOL_TOKEN, SOL_BOT, "sol_own_bot", "Sol")
    with pytest.raises(ConfigError) as caught:
        await gateways.start(telegram={"bots": {"soll": SOL_TOKEN}})
    message = str(caught.value)
    assert "telegram.bots names soll, but there is no such partner" in message
    assert "example" in message  # the partners there are, to pick from
    assert SOL_TOKEN not in message


@pytest.mark.parametrize(
    ("bots", "says"),
    [
        ('mira = "not-a-token"', "mira: not a bot token"),
        (f'mira = "{TOKEN}"', "mira: is telegram.token itself"),
        ('mira = "1:abc"\nsol = "1:abc"', "sol and mira have the same token"),
        ("mira = 12", "telegram.bots.mira: Input should be a valid string"),
    ],
)
def test_a_malformed_partner_token_is_refused_with_the_partner_named_and_the_value_hidden(
    bots: str, says: str
) -> None:
    text = f'[telegram]\ntoken = "{TOKEN}"\n[telegram.bots]\n{bots}\n'
    with pytest.raises(ConfigError) as caught:
        parse_config(text, Path("config.toml"), {})
    message = str(caught.value)
    assert says in message
    assert "(value hidden)" in message
    for secret in ("not-a-token", "1:abc", TOKEN):
        assert secret not in message


def test_partner_tokens_need_the_main_bot(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[telegram.bots]\nmira = "1:abc"\n')
    with pytest.raises(ConfigError, match="needs telegram.token as well"):
        load_config(path, {})


async def test_doctor_checks_every_partner_token_and_names_the_bad_one(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeTelegram(bot_username="mira_home_bot") as telegram:
        telegram.add_bot(MIRA_TOKEN, MIRA_BOT, "mira_own_bot", "Mira")
        PartnerCatalog(tmp_path / "data" / "partners").ensure_example()
        config = write_config(
            tmp_path,
            fake_llm.base_url,
            f'[owner]\ntelegram_ids = [42]\n[telegram]\ntoken = "{TOKEN}"\n'
            f'base_url = "{telegram.base_url}"\n[telegram.bots]\nexample = "{MIRA_TOKEN}"\n'
            f'ghost = "{SOL_TOKEN}"\n',
        )
        code, lines = await doctor(config, capsys)
    text = "\n".join(lines)
    assert code == 1
    assert "ok  telegram.bots.example: speaks as @mira_own_bot in groups" in lines
    problems = bad(lines)
    assert any(
        "telegram.bots.ghost was rejected by Telegram (401)" in line and "@BotFather" in line
        for line in problems
    ), text
    assert any("telegram.bots.ghost: there is no partner ghost" in line for line in problems)
    assert MIRA_TOKEN not in text and SOL_TOKEN not in text
    getmes = [c for c in telegram.calls if c.method == "getMe"]
    assert {c.bot_id for c in getmes} == {MAIN_BOT, MIRA_BOT, None}  # None: the refused one
