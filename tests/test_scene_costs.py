"""What scenes cost: scene turns and speak-gate calls booked under their own kinds (``scene``,
``gate``) on the partner and on the group, and a group's daily token budget that stops the
talk nobody asked for — partner hand-overs, lively joins — while messages addressed to the
partners are still answered, reset at midnight on the group's calendar. End to end on the real
python-telegram-bot against the fakes, and the store's part on every backend."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config.model import load_config
from bot.gateway.scene_costs import SceneCosts, group_of
from bot.store import NewMessage, NewUsage, Store
from partners.catalog import PartnerCatalog
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
from tests.test_scenes import say, scene, speaker_of
from tests.test_speak_gate import make_lively

TELEGRAM_GROUP = group_of("telegram", str(GROUP))


async def usage_rows(gateway: Gateway) -> list[tuple[str, str, int]]:
    """(partner, kind, tokens) of today's usage."""
    rows = await gateway.app.store.usage("0000-00-00")
    return [(r["partner_id"], r["kind"], r["prompt_tokens"] + r["completion_tokens"]) for r in rows]


async def group_spent(gateway: Gateway) -> int:
    app = gateway.app
    cast = [app.catalog.require(p) for p in ("example", "sol")]
    costs = SceneCosts(gateway.config, app.store)
    return await costs.spent_today(TELEGRAM_GROUP, cast)


async def admin_says(fake: FakeTelegram, text: str, chat_id: int = GROUP) -> str:
    before = len(fake.sent("sendMessage", chat_id))
    kind = "private" if chat_id == OWNER else "supergroup"
    fake.send_user_message(chat_id=chat_id, chat_type=kind, text=text, user_id=OWNER)
    answers = await fake.wait_for_sent(chat_id=chat_id, count=before + 1)
    return answers[-1].text or ""


async def test_scene_turns_are_booked_as_scene_on_each_partner_and_on_the_group(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(
        Reply(text="Tea.", prompt_tokens=100, completion_tokens=10),
        Reply(text="Coffee, Mira.", prompt_tokens=200, completion_tokens=20),
        Reply(text="Fine.", prompt_tokens=300, completion_tokens=30),
    )
    say(fake, "What do both of you drink?")  # both answer; Sol names Mira: a hand-over
    await fake.wait_for_sent(chat_id=GROUP, count=3)
    await settled(fake, gateway)
    assert sorted(await usage_rows(gateway)) == [("example", "scene", 440), ("sol", "scene", 220)]
    assert await group_spent(gateway) == 660
    # a DM with a partner stays "chat", and is not the group's
    fake.send_user_message(chat_id=OWNER, text="/partner sol", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER)
    fake_llm.script(Reply(text="Hi.", prompt_tokens=5, completion_tokens=5))
    fake.send_user_message(chat_id=OWNER, text="hello", user_id=OWNER)
    await fake.wait_for_sent(chat_id=OWNER, count=2)
    await settled(fake, gateway)
    assert ("sol", "chat", 10) in await usage_rows(gateway)
    assert await group_spent(gateway) == 660
    usage = await admin_says(fake, "/admin usage", OWNER)
    assert "sol scene: 200 + 20" in usage and "example scene: 400 + 40" in usage
    shown = await admin_says(fake, "/admin scene")
    assert "daily_token_budget = 0 (no budget)" in shown and ": 660 tokens" in shown


async def test_gate_calls_are_booked_as_gate_on_the_partner_and_the_group(
    gateways: TelegramGateways, fake: FakeTelegram
) -> None:
    gateway = await scene(gateways, "sol")
    app = gateway.app
    cast = [app.catalog.require("example"), app.catalog.require("sol")]
    costs = SceneCosts(gateway.config, app.store)
    await costs.book_gate(TELEGRAM_GROUP, cast, "sol", "small-model", 40, 2)
    await costs.book_gate(TELEGRAM_GROUP, cast, "sol", "small-model", 40, 2)
    assert await usage_rows(gateway) == [("sol", "gate", 84)]
    assert await costs.spent_today(TELEGRAM_GROUP, cast) == 84
    usage = await admin_says(fake, "/admin usage", OWNER)
    assert "sol gate: 80 + 4" in usage


async def test_a_spent_group_budget_stops_hand_overs_but_addressed_messages_are_answered(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol", scene={"daily_token_budget": 500})
    fake_llm.script(Reply(text="Mira knows.", prompt_tokens=600, completion_tokens=10))
    say(fake, "Sol, what about rain?")  # Sol names Mira, but the group's day is spent now
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"]
    shown = await admin_says(fake, "/admin scene")
    assert "daily_token_budget = 500" in shown and "used up" in shown
    fake_llm.script(Reply(text="Here."), Reply(text="Me too."))
    say(fake, "Mira? and both of you, are you there?")  # addressed: still answered, by both
    await fake.wait_for_sent(chat_id=GROUP, count=4)
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol", "Mira", "Sol"]


async def test_without_a_budget_the_same_hand_over_happens(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(gateways, "sol")
    fake_llm.script(
        Reply(text="Mira knows.", prompt_tokens=600, completion_tokens=10), Reply(text="I do.")
    )
    say(fake, "Sol, what about rain?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol", "Mira"]


async def lively_scene(gateways: TelegramGateways, **sections: Any) -> Gateway:
    gateways.add_partner("sol", "Sol")
    make_lively(gateways, "sol", "[tea]")
    gateway = await gateways.start(**sections)
    for partner in ("example", "sol"):
        await gateway.app.store.bind("telegram", str(GROUP), partner, "command")
    return gateway


async def test_a_spent_group_budget_stops_lively_joins(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await lively_scene(gateways, scene={"daily_token_budget": 100})
    fake_llm.script(Reply(text="Oolong!", prompt_tokens=150, completion_tokens=10))
    say(fake, "I just brewed some oolong tea")  # Sol joins: the budget was not spent yet
    await settled(fake, gateway)
    say(fake, "Is green tea better, or black tea?")  # would join, but the day is spent
    await settled(fake, gateway)
    assert [speaker_of(r) for r in fake_llm.requests] == ["Sol"]
    assert texts(fake.sent("sendMessage", GROUP)) == ["<b>Sol</b>: Oolong!"]


async def test_with_mention_gating_off_a_spent_budget_leaves_unaddressed_talk_unanswered(
    gateways: TelegramGateways, fake: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = await scene(
        gateways, "sol", access={"mention_gating": False}, scene={"daily_token_budget": 100}
    )
    fake_llm.script(Reply(text="Hello!", prompt_tokens=150, completion_tokens=10))
    say(fake, "nice weather today")
    await settled(fake, gateway)
    say(fake, "and tomorrow too")  # nobody addressed; the group's day is spent
    await settled(fake, gateway)
    assert len(fake_llm.requests) == 1
    fake_llm.script(Reply(text="Yes?"))
    say(fake, "Sol?")
    await fake.wait_for_sent(chat_id=GROUP, count=2)
    await settled(fake, gateway)
    assert speaker_of(fake_llm.requests[-1]) == "Sol"


def test_a_groups_day_is_its_first_partners_and_its_budget_resets_at_that_midnight(
    tmp_path: Path,
) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    catalog.create("kiri", "Kiri")
    catalog.create("sol", "Sol")
    preset = tmp_path / "partners" / "kiri" / "preset.yml"
    with preset.open("a", encoding="utf-8") as file:
        file.write("\ntimezone: Pacific/Kiritimati\n")  # UTC+14
    catalog.reload()
    kiri, sol = catalog.require("kiri"), catalog.require("sol")
    path = tmp_path / "config.toml"
    path.write_text('[owner]\ntimezone = "UTC"\n[scene]\ndaily_token_budget = 10\n')
    costs = SceneCosts(load_config(path, {}), store=None)  # only its calendar is read
    costs.clock = datetime(2030, 5, 1, 9, 30, tzinfo=UTC).timestamp  # 23:30 in Kiritimati
    assert costs.day([kiri, sol]) == "2030-05-01"
    assert costs.day([sol, kiri]) == "2030-05-01"  # the owner's: UTC
    costs.clock = datetime(2030, 5, 1, 10, 30, tzinfo=UTC).timestamp  # 00:30 next day there
    assert costs.day([kiri, sol]) == "2030-05-02"
    assert costs.day([sol, kiri]) == "2030-05-01"


async def test_a_scene_budget_spent_yesterday_on_the_groups_calendar_allows_today(
    store: Store, tmp_path: Path
) -> None:
    catalog = PartnerCatalog(tmp_path / "partners")
    catalog.ensure_example()
    catalog.create("sol", "Sol")
    catalog.reload()
    cast = [catalog.require("example"), catalog.require("sol")]
    path = tmp_path / "config.toml"
    path.write_text('[owner]\ntimezone = "UTC"\n[scene]\ndaily_token_budget = 50\n')
    costs = SceneCosts(load_config(path, {}), store)
    costs.clock = datetime(2030, 5, 1, 23, 0, tzinfo=UTC).timestamp
    await costs.book_gate(TELEGRAM_GROUP, cast, "sol", "m", 40, 10)
    assert await costs.exhausted(TELEGRAM_GROUP, cast)
    assert not await costs.exhausted(group_of("telegram", "-1"), cast)  # another group
    assert not await costs.exhausted(TELEGRAM_GROUP, cast[:1])  # one partner: no scene
    costs.clock = datetime(2030, 5, 2, 0, 30, tzinfo=UTC).timestamp
    assert not await costs.exhausted(TELEGRAM_GROUP, cast)


async def test_a_turns_tokens_are_booked_on_its_group_with_the_reply(store: Store) -> None:
    inbound = NewMessage(
        "telegram:-1", "user", "hi", "group:telegram:-1", status="pending", dedup_key="d1",
        queue_key="scene:telegram:-1", partner_id="sol", user_key="telegram:5",
    )  # fmt: skip
    first = await store.add_message(inbound)
    second = await store.add_message(replace(inbound, dedup_key="d2"))
    assert first is not None and second is not None
    reply = NewMessage("telegram:-1", "assistant", "hello", "group:telegram:-1", partner_id="sol")
    scene = NewUsage("2030-05-01", "sol", "scene", "m", 30, 5, "telegram:-1", "2030-05-02")
    await store.finish_turn([first], None, reply, usage=scene)
    plain = NewUsage("2030-05-01", "sol", "chat", "m", 7, 1)
    await store.finish_turn([second], None, reply, usage=plain)
    assert await store.group_tokens_on("telegram:-1", "2030-05-02") == 35
    assert await store.group_tokens_on("telegram:-1", "2030-05-01") == 0
    rows = await store.usage("2030-05-01")
    assert sorted((r["kind"], r["prompt_tokens"]) for r in rows) == [("chat", 7), ("scene", 30)]
    await store.book_usage(NewUsage("2030-05-01", "sol", "gate", "m", 4, 1, "telegram:-1", "x"))
    assert await store.group_tokens_on("telegram:-1", "x") == 5
