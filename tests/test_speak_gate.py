"""The speak gate: who speaks to group talk nobody addressed. Clear cases are decided by the
score with no model call (a lively partner's interests and open questions, a partner's own
talk going on, a message for a person); an ambiguous one asks the model one small yes/no
question, capped per group and hour; a model that fails or hangs leaves the message
unanswered and holds nothing up. The default presence stays quiet in a group of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.config.model import ConfigError, load_config
from bot.gateway.speak_gate import ANSWER_TOKENS
from bot.gateway.speak_score import Call, presence, read, weigh
from bot.gateway.speak_words import mentions
from bot.store import MessageRow
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from tests.admin_support import admin
from tests.conftest import Harness
from tests.fakes.fake_llm import Failure, FakeLLM, Reply
from tests.fakes.fake_telegram import FakeTelegram
from tests.telegram_harness import (
    GROUP,
    Gateway,
    TelegramGateways,
    settled,
    telegram_fake,  # noqa: F401 (the fake fixture)
    telegram_gateways,  # noqa: F401 (the gateways fixture)
    texts,
)
from tests.test_scenes import say, speaker_of

NOW = 1_800_000_000.0
BOB = 502


def cast(tmp_path: Path, *members: tuple[str, str, str, str]) -> list[Partner]:
    """Partners (id, name, presence, interests) on disk, in binding order."""
    catalog = PartnerCatalog(tmp_path / "partners")
    for partner_id, name, kind, words in members:
        partner = catalog.create(partner_id, name)
        with (partner.dir / "preset.yml").open("a", encoding="utf-8") as preset:
            preset.write(f"\npresence: {kind}\ninterests: {words}\n")
    catalog.reload()
    return [catalog.require(member[0]) for member in members]


def trio(tmp_path: Path) -> list[Partner]:
    return cast(
        tmp_path,
        ("mira", "Mira", "lively", "[tea, cake, 茶]"),
        ("sol", "Sol", "addressed", "[star, telescope]"),
        ("kai", "Kai", "quiet", "[chess]"),
    )


def person(i: int, speaker: str, text: str, ago: float, to: str | None = None) -> MessageRow:
    role = "user" if to else "context"
    return MessageRow(
        i, None, to, "c", f"m{i}", f"t:{speaker}", speaker, role, text, "g", "done", NOW - ago
    )


def partner_said(i: int, partner_id: str, text: str, ago: float) -> MessageRow:
    return MessageRow(
        i, None, partner_id, "c", None, None, partner_id, "assistant", text, "g", "done", NOW - ago
    )


def who(partners: list[Partner], text: str, rows: list[MessageRow] = (), sender: str = "Bob",
        to_person: bool = False) -> tuple[str | None, Call]:  # fmt: skip
    verdict = weigh(partners, read(text, sender, to_person, rows, NOW))
    return verdict.partner_id, verdict.call


def test_a_lively_partner_joins_talk_about_its_interests_and_open_questions(
    tmp_path: Path,
) -> None:
    partners = trio(tmp_path)
    assert who(partners, "I just brewed some oolong tea") == ("mira", Call.JOIN)
    assert who(partners, "我泡了一壶茶") == ("mira", Call.JOIN)  # CJK words anywhere
    assert who(partners, "my cakes never rise") == ("mira", Call.JOIN)  # a plural finds "cake"
    assert who(partners, "anyone have a good book recommendation?") == ("mira", Call.JOIN)
    assert who(partners, "I brewed some coffee")[1] is Call.STAY
    assert who(partners, "steady tears")[1] is Call.STAY  # whole words only
    assert who(partners, "brb, making tea")[1] is Call.STAY  # said in passing
    assert who(partners, "what time are we meeting tomorrow?")[1] is Call.STAY  # plans
    assert who(partners, "lol")[1] is Call.STAY


def test_a_question_to_the_room_in_a_partners_field_is_that_partners(tmp_path: Path) -> None:
    partners = trio(tmp_path)
    assert who(partners, "can you see stars with a small telescope?") == ("sol", Call.JOIN)
    assert who(partners, "I saw so many stars last night")[1] is Call.STAY  # news, no question
    # the quiet partner's field: nobody (the lively one stays out of it)
    assert who(partners, "what's a good chess opening for a beginner?")[1] is Call.STAY


def test_a_message_for_a_person_is_answered_by_nobody(tmp_path: Path) -> None:
    partners = trio(tmp_path)
    earlier = [person(1, "Dana", "hi", 7200)]
    assert who(partners, "Dana, what tea do you like?", earlier)[1] is Call.STAY
    assert who(partners, "Tom, bring the cake at 6")[1] is Call.STAY
    assert who(partners, "@dana_k any good tea?")[1] is Call.STAY
    assert who(partners, "what tea is best?", to_person=True)[1] is Call.STAY
    assert who(partners, "Honestly, what tea is best?") == ("mira", Call.JOIN)


def test_a_message_that_goes_on_with_a_partners_talk_is_that_partners(tmp_path: Path) -> None:
    partners = trio(tmp_path)
    sol = [person(1, "Bob", "Sol, any tips for hiking?", 60, "sol"),
           partner_said(2, "sol", "Good boots and skip the ridges.", 50)]  # fmt: skip
    assert who(partners, "why skip the ridges?", sol) == ("sol", Call.JOIN)
    assert who(partners, "haha my knees agree", sol) == ("sol", Call.JOIN)
    assert who(partners, "ok thanks!", sol)[1] is Call.STAY  # nothing to answer
    assert who(partners, "Dana, you coming?", sol)[1] is Call.STAY
    an_hour_later = [*sol[:1], partner_said(2, "sol", "Good boots.", 3600)]
    assert who(partners, "why?", an_hour_later)[1] is Call.STAY
    kai = [person(1, "Dana", "Kai, a first opening?", 60, "kai"),
           partner_said(2, "kai", "The Italian. Quick castling.", 50)]  # fmt: skip
    assert who(partners, "why castle early?", kai, sender="Dana") == ("kai", Call.JOIN)
    assert who(partners, "I always lose my queen", kai, sender="Dana")[1] is Call.STAY  # quiet


def test_only_a_lively_partner_speaks_unaddressed_in_a_group_of_its_own(tmp_path: Path) -> None:
    (sol,) = cast(tmp_path, ("sol", "Sol", "addressed", "[star]"))
    rows = [person(1, "Bob", "Sol, which star?", 60, "sol"), partner_said(2, "sol", "Vega.", 50)]
    assert who([sol], "why Vega?", rows)[1] is Call.STAY


def test_a_case_the_score_cannot_tell_is_ambiguous(tmp_path: Path) -> None:
    partners = trio(tmp_path)
    # Mira answered Alice; Bob asks something that shares no word with it and says little
    rows = [person(1, "Alice", "Mira, a tea for tonight?", 40, "mira"),
            partner_said(2, "mira", "Chamomile, no caffeine.", 30)]  # fmt: skip
    assert who(partners, "is it open yet?", rows) == ("mira", Call.ASK)


def test_mentions_reads_whole_words_their_forms_and_cjk_anywhere() -> None:
    assert mentions("Green TEA, please", "tea")
    assert not mentions("teapot", "tea")
    assert mentions("来一杯茶吧", "茶")
    assert mentions("I like green tea a lot", "green tea")
    assert mentions("we went hiking", "hike") and mentions("so many stars", "star")


def test_presence_and_interests_are_checked_in_preset_yml(tmp_path: Path) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    partner = catalog.create("sol", "Sol")
    (partner.dir / "preset.yml").write_text("name: Sol\npresence: chatty\n", encoding="utf-8")
    catalog.reload()
    assert catalog.get("sol") is None
    assert "presence" in catalog.errors["sol"] and "lively" in catalog.errors["sol"]


def test_gate_calls_per_hour_is_a_checked_scene_setting(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[scene]\n")
    assert load_config(path, {}).scene.gate_calls_per_hour == 6
    path.write_text("[scene]\ngate_calls_per_hour = -1\n")
    with pytest.raises(ConfigError, match=r"scene\.gate_calls_per_hour: Input should be greater"):
        load_config(path, {})
    path.write_text("[scene]\ngate_calls_per_hour = 0\n")
    assert load_config(path, {}).scene.gate_calls_per_hour == 0


# ---- end to end: the real python-telegram-bot and openai clients against the fakes ----------


def make_lively(gateways: TelegramGateways, partner_id: str, interests: str) -> None:
    preset = gateways.data_dir / "partners" / partner_id / "preset.yml"
    with preset.open("a", encoding="utf-8") as file:
        file.write(f"\npresence: lively\ninterests: {interests}\n")


async def two_partners(gateways: TelegramGateways, **sections: Any) -> Gateway:
    gateways.add_partner("sol", "Sol")
    make_lively(gateways, "sol", "[tea]")
    gateway = await gateways.start(**sections)
    for partner in ("example", "sol"):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    return gateway


def bob_says(fake: FakeTelegram, text: str) -> None:
    fake.send_user_message(
        chat_id=GROUP, chat_type="supergroup", text=text, user_id=BOB, first_name="Bob"
    )


def gate_calls(fake_llm: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in fake_llm.requests if r.get("max_tokens") == ANSWER_TOKENS]


def chat_turns(fake_llm: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in fake_llm.requests if "max_tokens" not in r]


async def sol_answered_alice(fake: FakeTelegram, fake_llm: FakeLLM, gateway: Gateway) -> None:
    """Alice asks Sol by name; Sol answers: the talk is with Sol."""
    fake_llm.script(Reply(text="I love the rain."))
    say(fake, "Sol, what do you think of the weather?")
    await settled(fake, gateway)


async def test_clear_cases_make_no_model_call_of_the_gate(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways)
    say(fake, "lol")
    bob_says(fake, "Dana, are you coming tonight?")
    await settled(fake, gateway)
    assert fake_llm.requests == []
    fake_llm.script(Reply(text="Oolong! Good choice."))
    say(fake, "I just brewed some oolong tea")
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"] and gate_calls(fake_llm) == []


async def test_an_ambiguous_case_asks_the_model_once_and_follows_its_answer(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways)
    await sol_answered_alice(fake, fake_llm, gateway)
    fake_llm.script(Reply(text="no"))
    bob_says(fake, "is it open yet?")  # goes on with Sol's talk, or not?
    await settled(fake, gateway)
    (asked,) = gate_calls(fake_llm)
    question = asked["messages"][0]["content"]
    assert "Sol" in question and "Bob: is it open yet?" in question
    assert len(chat_turns(fake_llm)) == 1  # "no": Sol stays quiet
    fake_llm.script(Reply(text="yes"), Reply(text="Not yet, I think."))
    bob_says(fake, "and is it free?")
    await settled(fake, gateway)
    assert len(gate_calls(fake_llm)) == 2
    assert [speaker_of(r) for r in chat_turns(fake_llm)] == ["Sol", "Sol"]
    assert texts(fake.sent("sendMessage", GROUP))[-1] == "<b>Sol</b>: Not yet, I think."
    usage = await gateway.app.store.usage("2000-01-01")
    gate = [(row["partner_id"], row["calls"]) for row in usage if row["kind"] == "gate"]
    assert gate == [("sol", 2)]


async def test_the_gates_model_calls_are_capped_per_group_and_hour(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways, scene={"gate_calls_per_hour": 1})
    await sol_answered_alice(fake, fake_llm, gateway)
    fake_llm.script(Reply(text="no"))
    bob_says(fake, "is it open yet?")
    await settled(fake, gateway)
    bob_says(fake, "and is it free?")  # ambiguous too: the hour's call is spent
    await settled(fake, gateway)
    assert len(gate_calls(fake_llm)) == 1 and len(chat_turns(fake_llm)) == 1
    calls = await gateway.app.store.audit_rows("scene gate")
    assert [row["detail"]["chat"] for row in calls] == [f"telegram:{GROUP}"]


async def test_a_failing_or_hanging_gate_call_leaves_the_message_unanswered_and_holds_nothing_up(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways)
    gateway.app.gateway.gate.timeout = 0.5
    await sol_answered_alice(fake, fake_llm, gateway)
    fake_llm.script(Failure(500))
    bob_says(fake, "is it open yet?")
    await settled(fake, gateway)
    fake_llm.script(Reply(text="yes", delay_seconds=60))
    bob_says(fake, "and is it free?")
    await settled(fake, gateway)  # well within the harness's 10 s, not the model's 60
    assert len(gate_calls(fake_llm)) == 2 and len(chat_turns(fake_llm)) == 1
    kept = await gateway.app.store.chat_tail(f"telegram:{GROUP}", 0, 20)
    history = [(row.text, row.role) for row in kept if row.speaker == "Bob"]
    assert history == [("is it open yet?", "context"), ("and is it free?", "context")]
    fake_llm.script(Reply(text="Still here."))
    say(fake, "Sol, are you there?")
    await settled(fake, gateway)
    assert texts(fake.sent("sendMessage", GROUP))[-1] == "<b>Sol</b>: Still here."


async def test_a_lively_partner_joins_topics_within_the_hourly_cap(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways, scene={"max_unaddressed_per_hour": 1})
    fake_llm.script(Reply(text="Oolong! Good choice."))
    say(fake, "I just brewed some oolong tea")
    await settled(fake, gateway)
    assert texts(fake.sent("sendMessage", GROUP)) == ["<b>Sol</b>: Oolong! Good choice."]
    bob_says(fake, "Dana, how was your day?")  # for a person: the talk moved on
    bob_says(fake, "What a lovely day")  # nothing for anyone: group history
    await settled(fake, gateway)
    bob_says(fake, "Is green tea better, or black tea?")  # would join, but the hour's join is used
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"]
    joins = await gateway.app.store.audit_rows("scene join")
    assert [(row["actor"], row["detail"]["chat"]) for row in joins] == [
        ("partner:sol", f"telegram:{GROUP}")
    ]


async def test_a_message_to_everyone_goes_to_the_cast_not_through_the_gate(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways, scene={"max_unaddressed_per_hour": 1})
    fake_llm.script(Reply(text="Rooibos."), Reply(text="Oolong."))
    say(fake, "everyone, which tea tonight?")
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira", "Sol"]
    assert await gateway.app.store.audit_rows("scene join") == []  # the hour's join is unspent


async def test_by_default_nobody_answers_talk_nobody_addressed(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    gateway = await gateways.start()
    await gateway.app.store.bind("telegram", str(GROUP), "example", "command")
    say(fake, "I just brewed some oolong tea, anyone?")
    await settled(fake, gateway)
    assert fake_llm.requests == [] and fake.sent("sendMessage", GROUP) == []


async def test_a_quiet_partner_is_left_out_of_everyone(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateways.add_partner("sol", "Sol")
    preset = gateways.data_dir / "partners" / "sol" / "preset.yml"
    with preset.open("a", encoding="utf-8") as file:
        file.write("\npresence: quiet\n")
    gateway = await gateways.start()
    for partner in ("example", "sol"):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    fake_llm.script(Reply(text="Hello!"), Reply(text="Hi Alice."))
    say(fake, "hello everyone")
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira"]
    say(fake, "Sol, are you there?")  # its name still reaches it
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Mira", "Sol"]


async def test_the_owner_sets_a_partners_presence_by_command(harness: Harness) -> None:
    answer = await admin(harness, "/admin partner set example presence lively")
    assert "presence" in answer
    assert presence(harness.app.catalog.require("example")) == "lively"
    refused = await admin(harness, "/admin partner set example presence chatty")
    assert "quiet" in refused and "lively" in refused
    assert presence(harness.app.catalog.require("example")) == "lively"
