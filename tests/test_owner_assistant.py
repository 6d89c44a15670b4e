"""The owner's assistant: owner memory tools and consults that run as the partner."""

from __future__ import annotations

from typing import Any

from tests.conftest import OWNER_ID, Harness, dm
from tests.fakes.fake_llm import Reply, ToolCallSpec


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def test_owner_dm_without_partner_talks_to_the_assistant(harness: Harness) -> None:
    harness.llm.script(
        Reply(tool_calls=[ToolCallSpec("write_memory", {"op": "add", "text": "Owner: vegan"})]),
        Reply(text="Saved."),
    )
    await harness.send(dm(OWNER_ID, "remember I'm vegan", name="Owner"))
    await harness.settle()
    first = harness.llm.requests[0]
    assert {t["function"]["name"] for t in first["tools"]} == {
        "read_memory",
        "write_memory",
        "consult_partner",
    }
    assert "owner's assistant" in first["messages"][0]["content"]
    assert "- Owner: vegan <!-- m_" in harness.app.owner_file.path.read_text()
    assert harness.channel.sent[0].partner_name is None


async def test_consult_runs_as_the_partner_and_writes_its_memory(harness: Harness) -> None:
    owner_file = harness.app.owner_file
    owner_file.path.parent.mkdir(parents=True, exist_ok=True)
    owner_file.path.write_text("- owner fact\n")
    ask = ToolCallSpec("consult_partner", {"partner": "example", "question": "What tea do I like?"})
    memorize = ToolCallSpec("partner_memorize", {"op": "add", "text": "Owner asked about tea"})
    harness.llm.script(
        Reply(tool_calls=[ask]),
        Reply(tool_calls=[memorize]),
        Reply(text="Jasmine, I think."),
        Reply(text="Mira says jasmine."),
    )
    await harness.send(dm(OWNER_ID, "ask Mira about my tea", name="Owner"))
    await harness.settle()
    assistant, partner_first, partner_second, assistant_final = harness.llm.requests
    assert "Mira" in partner_first["messages"][0]["content"]
    assert {t["function"]["name"] for t in partner_first["tools"]} == {
        "partner_read",
        "partner_memorize",
        "partner_search",
    }
    assert tool_results(partner_second)[0].startswith("saved (entry=m_")
    consult_result = tool_results(assistant_final)[0]
    assert consult_result.startswith("Mira: Jasmine, I think.")
    assert "4 consults left" in consult_result
    partner_dir = harness.app.catalog.require("example").dir
    assert "Owner asked about tea" in (partner_dir / "MEMORY.md").read_text()
    assert owner_file.path.read_text() == "- owner fact\n"
    assert harness.channel.texts() == ["Mira says jasmine."]
    usage = {row["kind"] for row in await harness.app.store.usage("2000-01-01")}
    assert usage == {"chat", "consult"}


async def test_consults_thread_into_one_session_and_budget_is_enforced(
    harness_factory: Any,
) -> None:
    harness = await harness_factory(owner={"consult_budget": 1})
    first = ToolCallSpec("consult_partner", {"partner": "example", "question": "First question?"})
    second = ToolCallSpec("consult_partner", {"partner": "example", "question": "Follow-up?"})
    harness.llm.script(
        Reply(tool_calls=[first]),
        Reply(text="answer one"),
        Reply(tool_calls=[second]),
        Reply(text="fine"),
    )
    await harness.send(dm(OWNER_ID, "consult twice", name="Owner"))
    await harness.settle()
    assert "consult budget reached — answer directly" in tool_results(harness.llm.requests[3])[-1]
    harness.llm.script(Reply(tool_calls=[second]), Reply(text="answer two"), Reply(text="ok"))
    await harness.send(dm(OWNER_ID, "next turn", name="Owner"))
    await harness.settle()
    follow_up = harness.llm.requests[-2]["messages"]
    assert any(m["content"] == "answer one" for m in follow_up)
    sessions = await harness.app.store.sessions_of("example")
    assert len(sessions) == 1 and sessions[0].title == "First question?"


async def test_consulting_an_unknown_partner_is_a_tool_error(harness: Harness) -> None:
    ask = ToolCallSpec("consult_partner", {"partner": "nobody", "question": "hi"})
    harness.llm.script(Reply(tool_calls=[ask]), Reply(text="couldn't"))
    await harness.send(dm(OWNER_ID, "ask nobody", name="Owner"))
    await harness.settle()
    assert "no partner 'nobody'" in tool_results(harness.llm.requests[1])[0]


async def test_a_consulted_partners_markers_never_reach_the_owner(harness: Harness) -> None:
    ask = ToolCallSpec("consult_partner", {"partner": "example", "question": "Happy?"})
    harness.llm.script(
        Reply(tool_calls=[ask]),
        Reply(text="[[react:❤]] Very happy [[silent]]"),
        Reply(text="Mira is happy."),
    )
    await harness.send(dm(OWNER_ID, "ask Mira", name="Owner"))
    await harness.settle()
    assert tool_results(harness.llm.requests[-1])[0].startswith("Mira: Very happy")
    rows = await harness.app.store.partner_messages("example")
    assert [r.text for r in rows if r.role == "assistant"] == ["Very happy"]
