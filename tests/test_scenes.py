"""Scenes end to end on the real python-telegram-bot against the fake Bot API and fake LLM: a
group with two or three bound partners, who answers what, in which order, what each partner
hears of the others, how partner-to-partner turns stop, and what never reaches a scene prompt.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bot.config.model import ConfigError, load_config
from bot.gateway.scenes import paused_key, speaks_to_all
from partners.memory import MemoryFile
from partners.tools import user_memory_file
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    GROUP,
    OWNER,
    Gateway,
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
    texts,
)

ALICE = 501
NAMES = {"example": "Mira", "sol": "Sol", "kai": "Kai"}


def speaker_of(request: dict[str, Any]) -> str:
    """Which partner a model request speaks for, from its system prompt."""
    system = str(request["messages"][0]["content"])
    return next(name for name in NAMES.values() if f"You are {name}." in system)


def prompt_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"][1:], ensure_ascii=False)


async def scene(gateways: TelegramGateways, *partners: str, **sections: Any) -> Gateway:
    for partner in partners:
        if partner != "example":
            gateways.add_partner(partner, NAMES[partner])
    gateway = await gateways.start(**sections)
    for partner in ("example", *partners):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    return gateway


def say(fake: FakeTelegram, text: str, user_id: int = ALICE) -> dict[str, Any]:
    return fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text=text, user_id=user_id, first_name="Alice"
    )


def group_texts(fake: FakeTelegram) -> list[str]:
    return texts(fake.sent("sendMessage", GROUP))


async def test_a_message_naming_one_partner_is_answered_by_that_one_alone(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(Reply(text="Sunny as ever."))
    say(fake, "Sol, how's the weather?")
    await settled(fake, gateway)
    assert group_texts(fake) == ["<b>Sol</b>: Sunny as ever."]
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"]


async def test_both_of_you_is_answered_by_both_in_cast_order_and_the_second_hears_the_first(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(Reply(text="I love rain."), Reply(text="Rain is fine by me."))
    say(fake, "What do you both of you think of rain?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert group_texts(fake) == ["<b>Mira</b>: I love rain.", "<b>Sol</b>: Rain is fine by me."]
    mira, sol = fake_llm.requests
    assert [speaker_of(mira), speaker_of(sol)] == ["Mira", "Sol"]
    assert "I love rain." not in prompt_text(mira)
    heard = prompt_text(sol)
    assert "· Mira] I love rain." in heard  # the other partner's words, under its name
    assert heard.count("What do you both of you think of rain?") == 1
    assert heard.index("think of rain?") < heard.index("I love rain.")  # in the order said


async def test_everyone_in_chinese_addresses_the_whole_cast(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(Reply(text="好!"), Reply(text="好呀!"))
    say(fake, "大家好")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira", "Sol"]


async def test_messages_to_one_partner_reach_the_others_prompt_as_group_history(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(Reply(text="Sunny as ever."), Reply(text="Tea time!"))
    say(fake, "Sol, how's the weather?")
    await fake.wait_for_sent(chat_id=GROUP)
    say(fake, "and you, Mira?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    mira = fake_llm.requests[1]
    assert speaker_of(mira) == "Mira"
    heard = prompt_text(mira)
    assert "· Alice] Sol, how's the weather?" in heard
    assert "· Sol] Sunny as ever." in heard


async def test_a_partner_naming_another_hands_it_the_turn(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(Reply(text="Mira knows rain best."), Reply(text="Thanks! Rain is calm."))
    say(fake, "Sol, what about rain?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert group_texts(fake) == [
        "<b>Sol</b>: Mira knows rain best.",
        "<b>Mira</b>: Thanks! Rain is calm.",
    ]
    mira = fake_llm.requests[1]
    assert speaker_of(mira) == "Mira"
    assert fake_llm.last_user_text(mira).endswith("· Sol] Mira knows rain best.")


async def test_a_reply_to_one_partner_naming_another_is_answered_by_both_in_cast_order(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(Reply(text="Sunny as ever."))
    say(fake, "Sol, how's the weather?")
    [sol] = await fake.wait_for_sent(chat_id=GROUP)
    await settled(fake, gateway)
    fake_llm.script(Reply(text="Rain later."), Reply(text="Umbrellas then."))
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text="really? what does Mira say?",
        user_id=ALICE, reply_to_message=sol.result,
    )  # fmt: skip
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol", "Mira", "Sol"]
    assert group_texts(fake)[1:] == ["<b>Mira</b>: Rain later.", "<b>Sol</b>: Umbrellas then."]
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text="and tomorrow?", user_id=ALICE,
        reply_to_message=sol.result,
    )  # fmt: skip
    await fake.wait_for_sent(chat_id=GROUP, count=4)
    await settled(fake, gateway)
    assert speaker_of(fake_llm.requests[-1]) == "Sol"  # the partner replied to, not the first


def names_everyone_else(request: dict[str, Any]) -> Reply:
    """A partner that always hands the turn to every other partner: chains must still end."""
    me = speaker_of(request)
    others = " and ".join(name for name in NAMES.values() if name != me)
    return Reply(text=f"What do you say, {others}?")


async def test_partner_chains_stop_at_the_caps_and_never_loop(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", "kai")
    fake_llm.responder = names_everyone_else
    per_message = []
    for n in range(12):
        before = len(fake_llm.requests)
        say(fake, f"Kai, round {n}?")
        await settled(fake, gateway)
        answers = [speaker_of(r) for r in fake_llm.requests[before:]]
        per_message.append(answers)
        assert answers[0] == "Kai"
        assert len(answers) - 1 <= 3  # scene.max_partner_turns
        assert all(answers.count(name) <= 2 for name in NAMES.values())
    # every chain reached the cap: Kai's answer, then three partner turns
    assert all(len(answers) == 4 for answers in per_message), per_message
    assert len(fake.sent("sendMessage", GROUP)) == len(fake_llm.requests) == 48


async def test_max_partner_turns_zero_means_partners_answer_people_only(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", scene={"max_partner_turns": 0})
    fake_llm.responder = names_everyone_else
    say(fake, "Sol?")
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"]


async def test_a_human_message_during_a_chain_preempts_the_turns_not_started(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", "kai")
    held = asyncio.Event()

    async def hold_mira(request: dict[str, Any]) -> Reply:
        if speaker_of(request) == "Mira":
            await held.wait()
            return Reply(text="Kai, your turn!")
        return Reply(text="Noted.")

    fake_llm.script(Reply(text="Mira and Kai, what do you think?"))
    fake_llm.responder = hold_mira
    say(fake, "Sol, start us off")
    await fake_llm.wait_for_requests(2)  # Mira's turn has started; Kai's waits behind it
    update = say(fake, "Sol, one more thing")
    await fake.wait_until(
        lambda: all(u["update_id"] > update["update_id"] for u in fake.pending_updates),
        timeout=10,
        description="the gateway to have stored the human message",
    )
    held.set()
    await settled(fake, gateway)
    speakers = [speaker_of(r) for r in fake_llm.requests]
    assert speakers == ["Sol", "Mira", "Sol"]  # Kai's turn was dropped; Mira's had started
    # Sol answers the person; Mira's answer, written meanwhile, follows it as said since
    assert "· Alice] Sol, one more thing" in prompt_text(fake_llm.requests[2])
    assert fake_llm.last_user_text(fake_llm.requests[2]).endswith("· Mira] Kai, your turn!")


async def test_no_per_user_memory_or_dm_reaches_a_scene_prompt(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    app = gateway.app
    sol = app.catalog.require("sol")
    await app.memory.add(
        user_memory_file(sol, f"telegram:{ALICE}"), "Alice's secret diary", reason="", source="t"
    )
    mira = app.catalog.require("example")
    await app.memory.add(
        MemoryFile(mira.dir, "MEMORY.md"), "Mira's own secret", reason="", source="t"
    )
    fake.send_user_message(chat_id=OWNER, text="/partner sol", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER)
    fake_llm.script(Reply(text="Kept."))
    fake.send_user_message(chat_id=OWNER, text="my owner DM secret", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER, count=2)
    fake_llm.script(Reply(text="Hi."), Reply(text="Hello."))
    say(fake, "hi both of you")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    scene_requests = fake_llm.requests[1:]
    assert [speaker_of(r) for r in scene_requests] == ["Mira", "Sol"]
    for request in scene_requests:
        everything = json.dumps(request["messages"], ensure_ascii=False)
        assert "Alice's secret diary" not in everything
        assert "my owner DM secret" not in everything
    assert "Mira's own secret" not in json.dumps(scene_requests[1]["messages"])


async def test_admin_scene_shows_the_cast_and_pauses_and_resumes(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    store = gateway.app.store

    async def admin(text: str, count: int) -> str:
        fake.send_user_message(chat_id=GROUP, chat_type="supergroup", text=text, user_id=OWNER)
        answers = await fake.wait_for_sent(chat_id=GROUP, count=count)
        return answers[-1].text or ""

    shown = await admin("/admin scene", 1)
    assert "Cast: Mira, Sol" in shown and "Scene: on" in shown
    assert "max_partner_turns = 3" in shown and "max_turns_per_partner = 2" in shown
    assert "max_unaddressed_per_hour = 4" in shown and "gate_calls_per_hour = 6" in shown
    assert "The scene is paused." in await admin("/admin scene pause", 2)
    assert paused_key("telegram", str(GROUP)) in await store.settings()
    fake_llm.responder = names_everyone_else
    say(fake, "hi both of you")
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira"]  # one answers; no hand-over
    assert "Scene: on" in await admin("/admin scene resume", 4)
    assert paused_key("telegram", str(GROUP)) not in await store.settings()
    assert "Usage: /admin scene [pause|resume]" in await admin("/admin scene dance", 5)


def test_scene_settings_are_validated_with_the_key_named(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[scene]\nmax_partner_turns = -1\nmax_turns_per_partner = 0\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    message = str(caught.value)
    assert "scene.max_partner_turns: Input should be greater than or equal to 0" in message
    assert "(got -1)" in message
    assert "scene.max_turns_per_partner: Input should be greater than or equal to 1" in message
    path.write_text("[scene]\nmax_partner_turn = 2\n")
    with pytest.raises(ConfigError, match=r"scene\.max_partner_turn: unknown key"):
        load_config(path, {})
    path.write_text("[scene]\nmax_partner_turns = 5\n")
    assert load_config(path, {}).scene.max_partner_turns == 5


@pytest.mark.parametrize(
    ("text", "everyone"),
    [
        ("What do both of you think?", True),
        ("Hello everyone!", True),
        ("你们觉得呢", True),
        ("大家好", True),
        ("Everyoneness is not a word", False),
        ("both of your cats", False),
        ("Mira, what do you think?", False),
    ],
)
def test_words_that_address_the_whole_cast(text: str, everyone: bool) -> None:
    assert speaks_to_all(text, ["english"]) is everyone


def test_ihr_beide_addresses_everyone_only_where_a_partner_speaks_german() -> None:
    assert speaks_to_all("Was meint ihr beide?", ["german"])
    assert not speaks_to_all("Was meint ihr beide?", ["english"])


async def test_the_scene_of_the_docs_goes_as_written(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    """docs/scenes.md's transcript: both answer, Sol's reply hands Mira one more turn."""
    gateway = await scene(gateways, "sol")
    fake_llm.script(
        Reply(text="Hot chocolate, no question. Sol, you'll say something bitter."),
        Reply(text="Black tea, strong. Bitter is honest, Mira."),
        Reply(text="Fine, fine. Alice, pick for us!"),
    )
    say(fake, "Mira, Sol — what would both of you drink on a rainy day?")
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    await settled(fake, gateway)
    fake_llm.script(Reply(text="Told you."))
    say(fake, "Tea. Sol wins.")
    await fake.wait_for_sent(chat_id=GROUP, count=4)
    await settled(fake, gateway)
    assert [t.split("</b>")[0] for t in group_texts(fake)] == [
        "<b>Mira",
        "<b>Sol",
        "<b>Mira",
        "<b>Sol",
    ]
    assert len(fake_llm.requests) == 4


async def test_partner_to_partner_turns_do_not_count_against_the_users_rate_limit(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", "kai", access={"user_messages_per_hour": 1})
    fake_llm.responder = names_everyone_else
    say(fake, "Kai, go")
    await settled(fake, gateway)
    # Kai hands the turn to two partners at once: were his words a user's, the second would
    # be over one message an hour and rest instead of answering
    assert [speaker_of(r) for r in fake_llm.requests] == ["Kai", "Mira", "Sol", "Kai"]
    assert len(fake.sent("sendMessage", GROUP)) == 4


async def test_admin_scene_belongs_in_a_group_and_says_when_one_partner_is_no_scene(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    fake.send_user_message(chat_id=OWNER, text="/admin scene", user_id=OWNER)
    [answer] = await fake.wait_for_sent(chat_id=OWNER)
    assert answer.text == "Send /admin scene inside the group whose scene you mean."
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text="/admin scene", user_id=OWNER
    )
    [shown] = await fake.wait_for_sent(chat_id=GROUP)
    assert "Cast: Mira" in (shown.text or "")
    assert "One partner is no scene" in (shown.text or "")
