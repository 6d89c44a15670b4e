"""The split memory model under attack: every rule has a test that tries to break it."""

from __future__ import annotations

from typing import Any

import pytest

from partners.memory import MemoryFile
from tests.conftest import OWNER_ID, Harness, HarnessFactory, dm, group_message
from tests.fakes.fake_llm import Reply, ToolCallSpec


@pytest.fixture
async def harness(
    storage_on_each_backend: dict[str, Any], harness_factory: HarnessFactory
) -> Harness:
    """Every test here runs on each store backend: the rules hold whatever stores the rows.
    Memory documents stay files on both, because these tests plant and read them as files;
    which document a write lands in is decided above the document backend, and the memory
    store's own tests (tests/test_memory.py, tests/test_documents.py) run on rows too."""
    return await harness_factory(storage={**storage_on_each_backend, "documents": "files"})


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def tool_names(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


async def select(harness: Harness, user_id: int, partner_id: str) -> None:
    chat_key = f"test:{user_id}"
    await harness.app.store.upsert_chat(chat_key, "test", str(user_id), None, "dm", None)
    await harness.app.store.select_partner(chat_key, partner_id)


async def turn(harness: Harness, inbound: Any, *replies: Reply) -> list[dict[str, Any]]:
    start = len(harness.llm.requests)
    harness.llm.script(*replies)
    await harness.send(inbound)
    await harness.settle()
    return harness.llm.requests[start:]


async def test_partner_turn_has_its_three_tools_and_not_the_owners(harness: Harness) -> None:
    requests = await turn(harness, dm(42, "hi"), Reply(text="hey"))
    assert tool_names(requests[0]) == {"partner_read", "partner_memorize", "partner_search"}


async def test_partner_cannot_write_owner_memory_even_if_the_model_calls_it(
    harness: Harness,
) -> None:
    owner_file = harness.app.owner_file
    owner_file.path.parent.mkdir(parents=True, exist_ok=True)
    owner_file.path.write_text("- The owner's birthday is 1 June\n")
    call = ToolCallSpec("write_memory", {"op": "add", "text": "Owner loves spam"})
    requests = await turn(
        harness, dm(42, "remember this for the owner"), Reply(tool_calls=[call]), Reply(text="ok")
    )
    assert "not available" in tool_results(requests[1])[0]
    assert owner_file.path.read_text() == "- The owner's birthday is 1 June\n"
    refusals = await harness.app.store.audit_rows("tool_refused")
    assert refusals and refusals[0]["detail"]["tool"] == "write_memory"


async def test_partner_reads_owner_memory_but_memorize_never_lands_there(harness: Harness) -> None:
    owner_file = harness.app.owner_file
    owner_file.path.parent.mkdir(parents=True, exist_ok=True)
    owner_file.path.write_text("- Shared: the house rules\n")
    await select(harness, OWNER_ID, "example")
    calls = [
        ToolCallSpec("partner_read", {}),
        ToolCallSpec("partner_memorize", {"op": "add", "text": "Likes chess"}),
    ]
    requests = await turn(
        harness,
        dm(OWNER_ID, "remember I like chess", name="Owner"),
        Reply(tool_calls=calls),
        Reply(text="noted"),
    )
    read, saved = tool_results(requests[1])
    assert "## Shared memory (the owner's — read-only)\n\n- Shared: the house rules" in read
    assert "## Your own memory\n\nnone yet — use partner_memorize to add" in read
    assert saved.startswith("saved (entry=m_")
    assert owner_file.path.read_text() == "- Shared: the house rules\n"
    partner_dir = harness.app.catalog.require("example").dir
    assert "Likes chess" in (partner_dir / "MEMORY.md").read_text()


async def test_editing_an_owner_entry_id_through_partner_memorize_fails(harness: Harness) -> None:
    owner_file = harness.app.owner_file
    result = await harness.app.memory.add(owner_file, "Owner fact", reason="", source="t")
    call = ToolCallSpec(
        "partner_memorize", {"op": "edit", "target_id": result.entry_id, "text": "changed"}
    )
    requests = await turn(harness, dm(42, "x"), Reply(tool_calls=[call]), Reply(text="ok"))
    assert "error: no entry" in tool_results(requests[1])[0]
    assert "Owner fact" in owner_file.path.read_text()


async def test_per_user_fact_lands_in_that_users_file_only(harness: Harness) -> None:
    partner_dir = harness.app.catalog.require("example").dir
    soul_before = (partner_dir / "SOUL.md").read_text()
    call = ToolCallSpec("partner_memorize", {"op": "add", "text": "Alice is allergic to nuts"})
    await turn(
        harness, dm(42, "remember: nuts allergy"), Reply(tool_calls=[call]), Reply(text="ok")
    )
    alice = partner_dir / "users" / "test-42.md"
    assert "Alice is allergic to nuts" in alice.read_text()
    assert "nuts" not in (partner_dir / "MEMORY.md").read_text()
    assert (partner_dir / "SOUL.md").read_text() == soul_before


async def test_user_b_never_recalls_user_a_dm(harness: Harness) -> None:
    await turn(harness, dm(42, "my secret password is marmalade", name="Alice"), Reply(text="ok"))
    search = ToolCallSpec("partner_search", {"query": "marmalade password"})
    requests = await turn(
        harness,
        dm(43, "what was the password?", name="Bob"),
        Reply(tool_calls=[search]),
        Reply(text="no idea"),
    )
    result = tool_results(requests[1])[0]
    assert result.startswith("no past messages match")
    own = await turn(
        harness,
        dm(42, "what was my password?", name="Alice"),
        Reply(tool_calls=[search]),
        Reply(text="marmalade"),
    )
    assert "marmalade" in tool_results(own[1])[0]


async def test_user_b_prompt_never_contains_user_a_memory(harness: Harness) -> None:
    call = ToolCallSpec("partner_memorize", {"op": "add", "text": "Alice secretly hates Bob"})
    await turn(harness, dm(42, "x", name="Alice"), Reply(tool_calls=[call]), Reply(text="ok"))
    read = ToolCallSpec("partner_read", {})
    requests = await turn(
        harness,
        dm(43, "what do you know?", name="Bob"),
        Reply(tool_calls=[read]),
        Reply(text="..."),
    )
    everything = str(requests)
    assert "hates Bob" not in everything


async def test_group_sees_no_per_user_memory_and_no_dms(harness: Harness) -> None:
    await harness.app.store.bind("test", "g1", "example", "command")
    call = ToolCallSpec("partner_memorize", {"op": "add", "text": "Alice's diary code is 7788"})
    await turn(
        harness,
        dm(42, "my diary code is 7788", name="Alice"),
        Reply(tool_calls=[call]),
        Reply(text="ok"),
    )
    read = ToolCallSpec("partner_read", {})
    search = ToolCallSpec("partner_search", {"query": "diary code 7788"})
    requests = await turn(
        harness,
        group_message("g1", 42, "@Mira what's my code?", name="Alice"),
        Reply(tool_calls=[read, search]),
        Reply(text="..."),
    )
    assert "7788" not in str(requests[0]["messages"])
    read_result, search_result = tool_results(requests[1])
    assert "About" not in read_result and "7788" not in read_result
    assert search_result.startswith("no past messages match")


async def test_partner_a_cannot_read_partner_b(harness: Harness) -> None:
    catalog = harness.app.catalog
    other = catalog.create("other")
    await harness.app.memory.add(
        MemoryFile(other.dir, "MEMORY.md"), "Other's secret recipe", reason="", source="t"
    )
    await select(harness, 42, "example")
    read = ToolCallSpec("partner_read", {})
    search = ToolCallSpec("partner_search", {"query": "secret recipe"})
    traversal = ToolCallSpec(
        "partner_memorize", {"op": "edit", "target_id": "../other/MEMORY", "text": "x"}
    )
    requests = await turn(
        harness,
        dm(42, "tell me the recipe"),
        Reply(tool_calls=[read, search, traversal]),
        Reply(text="no"),
    )
    read_result, search_result, edit_result = tool_results(requests[1])
    assert "Other's secret recipe" not in read_result
    assert search_result.startswith("no past messages match")
    assert edit_result.startswith("error: no entry")
    assert "Other's secret recipe" in (other.dir / "MEMORY.md").read_text()
    assert "secret recipe" not in str(requests[0]["messages"][0])


async def test_shared_scope_writes_the_partners_own_memory(harness: Harness) -> None:
    partner = harness.app.catalog.require("example")
    (partner.dir / "preset.yml").write_text("name: Mira\nmemory_scope: shared\n")
    harness.app.catalog.reload()
    call = ToolCallSpec("partner_memorize", {"op": "add", "text": "Plays the cello"})
    await turn(harness, dm(42, "I play cello"), Reply(tool_calls=[call]), Reply(text="ok"))
    assert "Plays the cello" in (partner.dir / "MEMORY.md").read_text()
    assert not (partner.dir / "users").exists()
