"""partner_search as the model uses it: snippets around the matched words, and the optional
date and speaker filters."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.store import NewMessage
from bot.store.search_terms import snippet
from partners.tools import PARTNER_TOOLS
from tests.conftest import Harness, dm
from tests.fakes.fake_llm import Reply, ToolCallSpec

FILLER = "We talked about the weather, the bus and what to cook for dinner tonight. " * 6


@pytest.fixture
def harness(harness_on_each_backend: Harness) -> Harness:
    """Every test here runs on each store backend: the rules hold whatever stores the rows."""
    return harness_on_each_backend


def test_a_snippet_is_cut_around_the_matched_words() -> None:
    text = FILLER + "By the way, my sister adopted a greyhound called Biscuit. " + FILLER
    cut = snippet(text, "what dog did her sister adopt?", width=120)
    assert "adopted a greyhound" in cut
    assert cut.startswith("…") and cut.endswith("…")
    assert len(cut) <= 122


def test_a_short_message_is_its_own_snippet() -> None:
    assert snippet("Luna and  Oliver!", "pets names") == "Luna and Oliver!"


def test_a_chinese_snippet_is_cut_around_the_shared_characters() -> None:
    text = "今天天气不错。" * 30 + "我上周末去爬了香山，红叶特别漂亮。" + "明天再聊吧。" * 30
    cut = snippet(text, "你还记得我去哪座山看红叶了吗", width=40)
    assert "红叶" in cut and len(cut) <= 42


def test_without_a_match_in_its_own_text_a_snippet_is_the_start() -> None:
    # found through its neighbour's words: show how it begins
    assert snippet(FILLER, "greyhound", width=50).startswith("We talked about the weather")


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def search(harness: Harness, **args: Any) -> str:
    start = len(harness.llm.requests)
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("partner_search", args)]), Reply(text="found it")
    )
    await harness.send(dm(42, "do you remember?"))
    await harness.settle()
    return tool_results(harness.llm.requests[start + 1])[0]


async def remember_said(harness: Harness, text: str, day: str, speaker: str = "Alice") -> None:
    when = datetime.fromisoformat(day).replace(hour=12, tzinfo=UTC).timestamp()
    await harness.app.store.add_message(
        NewMessage(
            f"old:{day}:{speaker}",
            "user" if speaker == "Alice" else "assistant",
            text,
            "user:test:42",
            partner_id="example",
            speaker=speaker,
            created_at=when,
        )
    )


async def test_results_show_a_snippet_not_the_whole_message(harness: Harness) -> None:
    await remember_said(
        harness, FILLER + "My kite got stuck in the old oak tree." + FILLER, "2024-03-02"
    )
    result = await search(harness, query="kite in a tree")
    assert "My kite got stuck in the old oak tree" in result
    assert len(result) < 300 and "…" in result


async def test_search_keeps_to_the_dates_asked_for(harness: Harness) -> None:
    for day in ("2024-01-10", "2024-02-10", "2024-03-10"):
        await remember_said(harness, f"flew the red kite ({day})", day)
    result = await search(harness, query="kite", since="2024-02-01", until="2024-02-10")
    assert "(2024-02-10)" in result
    assert "(2024-01-10)" not in result and "(2024-03-10)" not in result
    assert "(2024-01-10)" in await search(harness, query="kite", until="2024-01-10")


async def test_search_keeps_to_the_speaker_asked_for(harness: Harness) -> None:
    await remember_said(harness, "Alice: I love kites", "2024-01-10")
    await remember_said(harness, "Mira: kites are lovely", "2024-01-11", speaker="Mira")
    result = await search(harness, query="kites", speaker="alice")
    assert "Alice: I love kites" in result and "Mira:" not in result


async def test_a_bad_date_is_named_with_the_form_to_use(harness: Harness) -> None:
    result = await search(harness, query="kite", since="last tuesday")
    assert "'since' must be a date like 2024-05-31" in result


def test_the_search_schema_stays_small() -> None:
    # the tool schema is sent with every turn
    schema = next(t for t in PARTNER_TOOLS if t.name == "partner_search").schema()
    assert {"since", "until", "speaker"} <= set(schema["function"]["parameters"]["properties"])
    assert len(json.dumps(schema)) < 600


def test_a_word_written_against_cjk_characters_is_found_in_the_snippet() -> None:
    text = "今天天气不错。" * 30 + "我在Tokyo工作了三年" + "明天再聊吧。" * 30
    assert "Tokyo" in snippet(text, "tokyo", width=40)
