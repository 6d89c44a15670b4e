"""The speak gate: a lively partner joins group talk nobody addressed to it when its score
says so, no model call deciding; the default presence never does (as before scenes); a quiet
partner is left out of "everyone"; joins are capped per group and hour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.gateway.speak_gate import JOIN_AT, mentions, presence, score
from bot.store import MessageRow
from partners.catalog import PartnerCatalog
from partners.persona import Partner
from tests.admin_support import admin
from tests.conftest import Harness
from tests.fakes.fake_llm import FakeLLM, Reply
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


def lively(tmp_path: Path, interests: str = "[tea, 茶]") -> Partner:
    catalog = PartnerCatalog(tmp_path / "partners")
    partner = catalog.create("sol", "Sol")
    with (partner.dir / "preset.yml").open("a", encoding="utf-8") as preset:
        preset.write(f"\npresence: lively\ninterests: {interests}\n")
    catalog.reload()
    return catalog.require("sol")


def answer(partner_id: str, seconds_ago: float) -> MessageRow:
    return MessageRow(
        1, None, partner_id, "c", None, None, partner_id, "assistant", "hi", "a", "done",
        NOW - seconds_ago,
    )  # fmt: skip


def test_interests_questions_and_a_quiet_group_raise_the_score(tmp_path: Path) -> None:
    sol = lively(tmp_path)
    assert score(sol, "I brewed some tea", [], NOW) == 2 + 1  # interest, and nobody answered yet
    assert score(sol, "I brewed some tea", [], NOW) >= JOIN_AT
    assert score(sol, "我泡了茶", [], NOW) >= JOIN_AT  # CJK words anywhere
    assert score(sol, "I brewed some coffee", [], NOW) < JOIN_AT
    assert score(sol, "steady tears", [], NOW) < JOIN_AT  # whole words only
    assert score(sol, "anyone up?", [], NOW) == 1 + 1


def test_the_partners_last_turn_and_the_time_since_anyone_answered_count(tmp_path: Path) -> None:
    sol = lively(tmp_path)
    # the talk is with Sol, but he answered a moment ago: let people talk
    assert score(sol, "right?", [answer("sol", 10)], NOW) == 1 + 2 - 2
    # the talk is with Sol, a few minutes on: he goes on
    assert score(sol, "right?", [answer("sol", 200)], NOW) == 1 + 2
    # another partner answered a moment ago
    assert score(sol, "tea?", [answer("example", 10)], NOW) == 2 + 1 - 2
    # nobody answered for a long while
    assert score(sol, "tea?", [answer("example", 3600)], NOW) == 2 + 1 + 1


def test_mentions_reads_whole_words_and_cjk_anywhere() -> None:
    assert mentions("Green TEA, please", "tea")
    assert not mentions("teapot", "tea")
    assert mentions("来一杯茶吧", "茶")
    assert mentions("I like green tea a lot", "green tea")


def test_presence_and_interests_are_checked_in_preset_yml(tmp_path: Path) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    partner = catalog.create("sol", "Sol")
    (partner.dir / "preset.yml").write_text("name: Sol\npresence: chatty\n", encoding="utf-8")
    catalog.reload()
    assert catalog.get("sol") is None
    assert "presence" in catalog.errors["sol"] and "lively" in catalog.errors["sol"]


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


async def test_a_lively_partner_joins_talk_about_its_interests_within_the_hourly_cap(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await two_partners(gateways, scene={"max_unaddressed_per_hour": 1})
    fake_llm.script(Reply(text="Oolong! Good choice."))
    say(fake, "I just brewed some oolong tea")
    await settled(fake, gateway)
    assert texts(fake.sent("sendMessage", GROUP)) == ["<b>Sol</b>: Oolong! Good choice."]
    say(fake, "What a lovely day")  # nothing for anyone: group history
    await settled(fake, gateway)
    say(fake, "Is green tea better, or black tea?")  # would join, but the hour's join is used
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"]
    joins = await gateway.app.store.audit_rows("scene join")
    assert [(row["actor"], row["detail"]["chat"]) for row in joins] == [
        ("partner:sol", f"telegram:{GROUP}")
    ]


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
